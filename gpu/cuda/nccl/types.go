package nccl

import "fmt"

// DataType is an ncclDataType_t: the element type of a collective's
// buffers. The values are nccl.h's (checked against NCCL 2.23 to 2.30),
// passed to NCCL unchanged. Float8E4M3 and Float8E5M2 need NCCL >= 2.24
// (an older library answers ErrInvalidArgument).
type DataType int32

// The ncclDataType_t values.
const (
	Int8       DataType = 0  // ncclInt8, ncclChar
	Uint8      DataType = 1  // ncclUint8
	Int32      DataType = 2  // ncclInt32, ncclInt
	Uint32     DataType = 3  // ncclUint32
	Int64      DataType = 4  // ncclInt64
	Uint64     DataType = 5  // ncclUint64
	Float16    DataType = 6  // ncclFloat16, ncclHalf
	Float32    DataType = 7  // ncclFloat32, ncclFloat
	Float64    DataType = 8  // ncclFloat64, ncclDouble
	BFloat16   DataType = 9  // ncclBfloat16
	Float8E4M3 DataType = 10 // ncclFloat8e4m3 (NCCL >= 2.24)
	Float8E5M2 DataType = 11 // ncclFloat8e5m2 (NCCL >= 2.24)

	numDataTypes = 12 // ncclNumTypes
)

var dataTypeInfo = [numDataTypes]struct {
	name string
	size int
}{
	Int8:       {"ncclInt8", 1},
	Uint8:      {"ncclUint8", 1},
	Int32:      {"ncclInt32", 4},
	Uint32:     {"ncclUint32", 4},
	Int64:      {"ncclInt64", 8},
	Uint64:     {"ncclUint64", 8},
	Float16:    {"ncclFloat16", 2},
	Float32:    {"ncclFloat32", 4},
	Float64:    {"ncclFloat64", 8},
	BFloat16:   {"ncclBfloat16", 2},
	Float8E4M3: {"ncclFloat8e4m3", 1},
	Float8E5M2: {"ncclFloat8e5m2", 1},
}

// Valid reports whether t is one of the types above.
func (t DataType) Valid() bool { return t >= 0 && t < numDataTypes }

// Size is the size of one element in bytes; 0 for an invalid type.
func (t DataType) Size() int {
	if !t.Valid() {
		return 0
	}
	return dataTypeInfo[t].size
}

// String is the C name of the type ("ncclFloat32").
func (t DataType) String() string {
	if !t.Valid() {
		return fmt.Sprintf("ncclDataType_t(%d)", int32(t))
	}
	return dataTypeInfo[t].name
}

// RedOp is an ncclRedOp_t: a built-in reduction. The values are nccl.h's,
// passed to NCCL unchanged. Avg divides the sum by the number of ranks
// (integer types truncate).
type RedOp int32

// The built-in ncclRedOp_t values.
const (
	Sum  RedOp = 0 // ncclSum
	Prod RedOp = 1 // ncclProd
	Max  RedOp = 2 // ncclMax
	Min  RedOp = 3 // ncclMin
	Avg  RedOp = 4 // ncclAvg

	numRedOps = 5 // ncclNumOps
)

var redOpNames = [numRedOps]string{Sum: "ncclSum", Prod: "ncclProd", Max: "ncclMax", Min: "ncclMin", Avg: "ncclAvg"}

// Valid reports whether op is one of the built-in reductions.
func (op RedOp) Valid() bool { return op >= 0 && op < numRedOps }

// String is the C name of the reduction ("ncclSum").
func (op RedOp) String() string {
	if !op.Valid() {
		return fmt.Sprintf("ncclRedOp_t(%d)", int32(op))
	}
	return redOpNames[op]
}
