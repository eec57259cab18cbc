// Package pool keeps idle memory blocks by size class for reuse, for
// memory that is costly to get (device and pinned host memory behind a
// driver call, Go memory counted against the host's limit) and that its
// owner gives back explicitly. Go memory that the collector may take back
// at any time is better kept in a sync.Pool.
package pool

import (
	"iter"
	"math/bits"
)

// Class is the size class of an n-byte block, n > 0: the smallest power of
// two that holds it.
func Class(n int) int { return 1 << bits.Len(uint(n-1)) }

// Lists keeps idle blocks under a key (a size class, or a class and a
// device) and counts their bytes. The block put last under a key is taken
// first: it is the likeliest to be still in the caches. The zero value is
// empty. Lists is not safe for concurrent use: its owner's lock guards it.
type Lists[K comparable, T any] struct {
	free  map[K][]entry[T]
	bytes int
}

type entry[T any] struct {
	b    T
	size int
}

// Put keeps b, a block of size bytes, under k.
func (l *Lists[K, T]) Put(k K, b T, size int) {
	if l.free == nil {
		l.free = map[K][]entry[T]{}
	}
	l.free[k] = append(l.free[k], entry[T]{b, size})
	l.bytes += size
}

// Take removes and returns the block put last under k; false if there is
// none.
func (l *Lists[K, T]) Take(k K) (T, bool) {
	list := l.free[k]
	if len(list) == 0 {
		var zero T
		return zero, false
	}
	e := list[len(list)-1]
	list[len(list)-1] = entry[T]{} // the block is no longer the list's to keep alive
	l.free[k] = list[:len(list)-1]
	l.bytes -= e.size
	return e.b, true
}

// Len is the number of blocks under k.
func (l *Lists[K, T]) Len(k K) int { return len(l.free[k]) }

// Bytes is the size of all blocks kept.
func (l *Lists[K, T]) Bytes() int { return l.bytes }

// All yields every block kept, with its key, in no particular order.
func (l *Lists[K, T]) All() iter.Seq2[K, T] {
	return func(yield func(K, T) bool) {
		for k, list := range l.free {
			for _, e := range list {
				if !yield(k, e.b) {
					return
				}
			}
		}
	}
}

// Clear forgets every block kept.
func (l *Lists[K, T]) Clear() { *l = Lists[K, T]{} }
