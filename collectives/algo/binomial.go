package algo

// binomialTree is one rank's place in the binomial tree rooted at root, in
// ranks relative to the root (vr = rank - root mod n): rank v's parent is v
// with its lowest set bit cleared, and v's subtree is the relative ranks
// [v, v+span). Children come largest subtree first; child i covers the
// relative ranks [childVR[i], childVR[i]+childSpan[i]).
type binomialTree struct {
	n, root, vr, span int
	parent            int // absolute rank; -1 at the root
	children          []int
	childVR           []int
	childSpan         []int
}

func newBinomialTree(n, root, rank int) binomialTree {
	t := binomialTree{n: n, root: root, vr: mod(rank-root, n), parent: -1}
	mask := 1
	for ; mask < n; mask <<= 1 {
		if t.vr&mask != 0 {
			t.parent = t.abs(t.vr - mask)
			break
		}
	}
	t.span = min(mask, n-t.vr)
	for m := mask >> 1; m > 0; m >>= 1 {
		if v := t.vr + m; v < n {
			t.children = append(t.children, t.abs(v))
			t.childVR = append(t.childVR, v)
			t.childSpan = append(t.childSpan, min(m, n-v))
		}
	}
	return t
}

// abs is the absolute rank of relative rank v.
func (t binomialTree) abs(v int) int { return mod(v+t.root, t.n) }
