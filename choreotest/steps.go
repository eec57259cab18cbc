package choreotest

import (
	"fmt"
	"strings"

	"github.com/choreo-gpu/choreo/gpu"
)

// Step names a command the way a plan reads: "fill", "arange", "add",
// "scale", "update" (gpu.WriteValue), "wait" (gpu.WaitValue), and for a
// gpu.Copy the direction between memory kinds: "copy-d2h", "copy-h2d",
// "copy-d2d", "copy-h2h". A command type the kit does not know is named
// by its lower-cased type name.
func Step(c gpu.Command) string {
	switch c := c.(type) {
	case gpu.Fill, *gpu.Fill:
		return "fill"
	case gpu.Arange, *gpu.Arange:
		return "arange"
	case gpu.Add, *gpu.Add:
		return "add"
	case gpu.Scale, *gpu.Scale:
		return "scale"
	case gpu.WriteValue, *gpu.WriteValue:
		return "update"
	case gpu.WaitValue, *gpu.WaitValue:
		return "wait"
	case gpu.Copy:
		return copyStep(c)
	case *gpu.Copy:
		return copyStep(*c)
	case nil:
		return "nil"
	default:
		name := fmt.Sprintf("%T", c)
		name = name[strings.LastIndexByte(name, '.')+1:]
		return strings.ToLower(name)
	}
}

func copyStep(c gpu.Copy) string {
	return "copy-" + kindLetter(c.Src) + "2" + kindLetter(c.Dst)
}

func kindLetter(b gpu.Buffer) string {
	switch {
	case b == nil:
		return "?"
	case b.Kind() == gpu.HostMem:
		return "h"
	default:
		return "d"
	}
}

// Detail is Step with the command's arguments: "update(1)", "wait(2)",
// "copy-d2h(32B)", "fill(float32 x8)".
func Detail(c gpu.Command) string {
	switch c := c.(type) {
	case gpu.Fill:
		return fmt.Sprintf("fill(%s x%d)", c.DType, c.N)
	case gpu.Arange:
		return fmt.Sprintf("arange(%s x%d)", c.DType, c.N)
	case gpu.Add:
		return fmt.Sprintf("add(%s x%d)", c.DType, c.N)
	case gpu.Scale:
		return fmt.Sprintf("scale(%s x%d)", c.DType, c.N)
	case gpu.WriteValue:
		return fmt.Sprintf("update(%d)", c.Value)
	case gpu.WaitValue:
		return fmt.Sprintf("wait(%d)", c.Value)
	case gpu.Copy:
		return fmt.Sprintf("%s(%dB)", copyStep(c), c.Bytes)
	default:
		return Step(c)
	}
}
