package gpu

import "fmt"

// Command is one operation for a Queue. The concrete types below are the
// whole instruction set; backends switch on them.
type Command interface {
	// Validate checks the command's arguments without touching memory.
	Validate() error
	fmt.Stringer
}

// Fill sets N elements of Dst (from its start) to Value.
type Fill struct {
	Dst   Buffer
	DType DType
	N     int
	Value Scalar
}

// Arange sets element i of Dst to Start + i*Step, for i < N.
type Arange struct {
	Dst         Buffer
	DType       DType
	N           int
	Start, Step Scalar
}

// Copy copies Bytes bytes from Src[SrcOff:] to Dst[DstOff:]. Either buffer
// may be device or host memory; the ranges must not overlap when Src == Dst.
type Copy struct {
	Dst, Src       Buffer
	DstOff, SrcOff int
	Bytes          int
}

// Add sets Dst[i] = A[i] + B[i] for i < N. Dst may be A or B.
type Add struct {
	Dst, A, B Buffer
	DType     DType
	N         int
}

// Scale sets Dst[i] = Src[i] * Factor for i < N. Dst may be Src.
type Scale struct {
	Dst, Src Buffer
	DType    DType
	N        int
	Factor   Scalar
}

// WaitValue holds back every later command on its queue until Word >= Value
// (at once if it already is).
type WaitValue struct {
	Word  FenceWord
	Value uint32
}

// WriteValue raises Word to max(Word, Value) once every earlier command on
// its queue has completed and its writes are visible to the CPU; it never
// lowers the word.
type WriteValue struct {
	Word  FenceWord
	Value uint32
}

func badArg(op, format string, args ...any) error {
	return fmt.Errorf("gpu: %s: %s: %w", op, fmt.Sprintf(format, args...), ErrBadArgument)
}

func checkElems(op string, b Buffer, name string, dt DType, n int) error {
	if b == nil {
		return badArg(op, "nil %s buffer", name)
	}
	if !dt.Valid() {
		return badArg(op, "invalid dtype %v", dt)
	}
	if n < 0 {
		return badArg(op, "negative element count %d", n)
	}
	if n > b.Len()/dt.Size() { // n*size could overflow
		return badArg(op, "%s holds %d bytes, too few for %d %s elements", name, b.Len(), n, dt)
	}
	return nil
}

// Validate implements Command.
func (c Fill) Validate() error { return checkElems("fill", c.Dst, "dst", c.DType, c.N) }

// Validate implements Command.
func (c Arange) Validate() error { return checkElems("arange", c.Dst, "dst", c.DType, c.N) }

// Validate implements Command.
func (c Copy) Validate() error {
	if c.Dst == nil || c.Src == nil {
		return badArg("copy", "nil buffer")
	}
	if c.Bytes < 0 || c.DstOff < 0 || c.SrcOff < 0 {
		return badArg("copy", "negative size or offset")
	}
	if c.SrcOff > c.Src.Len() || c.Bytes > c.Src.Len()-c.SrcOff || c.DstOff > c.Dst.Len() || c.Bytes > c.Dst.Len()-c.DstOff {
		return badArg("copy", "range [%d,+%d) -> [%d,+%d) outside buffers of %d and %d bytes",
			c.SrcOff, c.Bytes, c.DstOff, c.Bytes, c.Src.Len(), c.Dst.Len())
	}
	if c.Src == c.Dst && c.SrcOff < c.DstOff+c.Bytes && c.DstOff < c.SrcOff+c.Bytes && c.SrcOff != c.DstOff {
		return badArg("copy", "overlapping ranges in one buffer")
	}
	return nil
}

// Validate implements Command.
func (c Add) Validate() error {
	if err := checkElems("add", c.Dst, "dst", c.DType, c.N); err != nil {
		return err
	}
	if err := checkElems("add", c.A, "a", c.DType, c.N); err != nil {
		return err
	}
	return checkElems("add", c.B, "b", c.DType, c.N)
}

// Validate implements Command.
func (c Scale) Validate() error {
	if err := checkElems("scale", c.Dst, "dst", c.DType, c.N); err != nil {
		return err
	}
	return checkElems("scale", c.Src, "src", c.DType, c.N)
}

// Validate implements Command.
func (c WaitValue) Validate() error {
	if c.Word == nil {
		return badArg("wait", "nil fence word")
	}
	return nil
}

// Validate implements Command.
func (c WriteValue) Validate() error {
	if c.Word == nil {
		return badArg("write", "nil fence word")
	}
	return nil
}

func (c Fill) String() string { return fmt.Sprintf("fill(%s x%d = %v)", c.DType, c.N, c.Value) }
func (c Arange) String() string {
	return fmt.Sprintf("arange(%s x%d, %v, %v)", c.DType, c.N, c.Start, c.Step)
}
func (c Copy) String() string  { return fmt.Sprintf("copy(%d bytes)", c.Bytes) }
func (c Add) String() string   { return fmt.Sprintf("add(%s x%d)", c.DType, c.N) }
func (c Scale) String() string { return fmt.Sprintf("scale(%s x%d * %v)", c.DType, c.N, c.Factor) }
func (c WaitValue) String() string {
	return fmt.Sprintf("wait(word >= %d)", c.Value)
}
func (c WriteValue) String() string {
	return fmt.Sprintf("write(word = max(word, %d))", c.Value)
}

// Name is a command's short name, for errors and traces: "fill", "arange",
// "copy", "add", "scale", "wait", "write", "peer-reduce".
func Name(c Command) string {
	switch c.(type) {
	case Fill:
		return "fill"
	case Arange:
		return "arange"
	case Copy:
		return "copy"
	case Add:
		return "add"
	case Scale:
		return "scale"
	case WaitValue:
		return "wait"
	case WriteValue:
		return "write"
	case PeerReduce:
		return "peer-reduce"
	}
	return fmt.Sprintf("%T", c)
}

// ValidateBatch validates every command of a batch; backends call it in Submit.
func ValidateBatch(batch []Command) error {
	for i, c := range batch {
		if c == nil {
			return badArg("submit", "command %d is nil", i)
		}
		if err := c.Validate(); err != nil {
			return fmt.Errorf("command %d: %w", i, err)
		}
	}
	return nil
}
