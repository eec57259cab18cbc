package algo

import (
	"testing"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// The levels' step ranges hold every step of the flat algorithms they run
// (ring, tree; the match runs once, on the whole group), for every ring a
// level runs at once, below the tag layout's limit.
func TestHierStepsFit(t *testing.T) {
	own := max(stepData+2*ringDepth, stepTree+1) // the levels' highest own step + 1
	if own > hierRowStep {
		t.Fatalf("a ring or tree uses steps up to %d, past hierRowStep %d", own-1, hierRowStep)
	}
	if hierMaxParts > maxHierHosts {
		t.Fatalf("%d parts do not fit between two levels (%d rings)", hierMaxParts, maxHierHosts)
	}
	for _, off := range []uint32{hierStepIntra1, hierStepCross, hierStepIntra2} {
		if off%hierStepIntra1 != 0 || off+maxHierHosts*hierRowStep > transport.MaxStep {
			t.Fatalf("level offset %d: its rings reach past %d", off, transport.MaxStep)
		}
	}
	if hierStepIntra1 < stepData+2*ringDepth || hierStepIntra1 < stepTree+1 {
		t.Fatalf("the first level's offset %d overlaps the flat algorithms' steps", hierStepIntra1)
	}
}
