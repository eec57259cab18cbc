package nccl

import (
	"errors"
	"fmt"

	"github.com/choreo-gpu/choreo/internal/errs"
)

// Sentinels, tested with errors.Is. Errors of failed NCCL calls unwrap to
// the one for their Result; ErrClosed and ErrInvalidArgument are choreo's
// own (internal/errs: gpu.ErrClosed, gpu.ErrBadArgument), so a layer above
// tests them with the sentinels it already knows.
var (
	// ErrUnavailable: no usable NCCL library (none of the paths opened, an
	// entry point is missing, or the system is not Linux).
	ErrUnavailable = errors.New("NCCL library unavailable")
	// ErrClosed: the communicator was aborted or destroyed.
	ErrClosed = errs.ErrClosed
	// ErrInvalidArgument: a bad argument, caught by this package before
	// NCCL saw it or by NCCL (ncclInvalidArgument).
	ErrInvalidArgument = errs.ErrBadArgument
	// ErrCUDA: a CUDA call inside NCCL failed (ncclUnhandledCudaError).
	ErrCUDA = errors.New("unhandled CUDA error")
	// ErrSystem: a system call failed (ncclSystemError).
	ErrSystem = errors.New("system error")
	// ErrInternal: NCCL's own bug or memory corruption (ncclInternalError).
	ErrInternal = errors.New("internal error")
	// ErrInvalidUsage: a call in the wrong state or order, such as a group
	// end without a start (ncclInvalidUsage).
	ErrInvalidUsage = errors.New("invalid usage")
	// ErrRemote: a peer exited or the network failed (ncclRemoteError);
	// errors wrapping it also wrap choreo's ErrPeerLost.
	ErrRemote = errors.New("remote error")
	// ErrInProgress: a non-blocking operation has not finished
	// (ncclInProgress).
	ErrInProgress = errors.New("operation in progress")
)

// Result is an ncclResult_t.
type Result int32

// The ncclResult_t values of nccl.h (unchanged from 2.12 to 2.30).
const (
	Success            Result = 0 // ncclSuccess
	UnhandledCUDAError Result = 1 // ncclUnhandledCudaError
	SystemError        Result = 2 // ncclSystemError
	InternalError      Result = 3 // ncclInternalError
	InvalidArgument    Result = 4 // ncclInvalidArgument
	InvalidUsage       Result = 5 // ncclInvalidUsage
	RemoteError        Result = 6 // ncclRemoteError
	InProgress         Result = 7 // ncclInProgress
)

var resultNames = [...]string{
	Success:            "ncclSuccess",
	UnhandledCUDAError: "ncclUnhandledCudaError",
	SystemError:        "ncclSystemError",
	InternalError:      "ncclInternalError",
	InvalidArgument:    "ncclInvalidArgument",
	InvalidUsage:       "ncclInvalidUsage",
	RemoteError:        "ncclRemoteError",
	InProgress:         "ncclInProgress",
}

// String is the C name of the result ("ncclRemoteError").
func (r Result) String() string {
	if r >= 0 && int(r) < len(resultNames) {
		return resultNames[r]
	}
	return fmt.Sprintf("ncclResult_t(%d)", int32(r))
}

// sentinel is the error Result r unwraps to; nil for Success and for
// results this package does not know.
func (r Result) sentinel() []error {
	switch r {
	case UnhandledCUDAError:
		return []error{ErrCUDA}
	case SystemError:
		return []error{ErrSystem}
	case InternalError:
		return []error{ErrInternal}
	case InvalidArgument:
		return []error{ErrInvalidArgument}
	case InvalidUsage:
		return []error{ErrInvalidUsage}
	case RemoteError:
		return []error{ErrRemote, errs.ErrPeerLost}
	case InProgress:
		return []error{ErrInProgress}
	}
	return nil
}

// Error is a failed NCCL call: the operation of this package that made it
// ("allreduce"), the entry point ("ncclAllReduce"), the result, NCCL's
// description of the result (ncclGetErrorString) and NCCL's last error
// message (ncclGetLastError: process-wide, so it may describe a failure
// on another goroutine; empty if NCCL had none). It prints as
// "nccl: allreduce: ncclAllReduce: ncclInvalidArgument (4): invalid
// argument (...): <last error>" and unwraps to its Result's sentinel.
type Error struct {
	Op     string
	Call   string
	Result Result
	Desc   string
	Last   string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("nccl: %s: %s: %v (%d)", e.Op, e.Call, e.Result, int32(e.Result))
	if e.Desc != "" {
		s += ": " + e.Desc
	}
	if e.Last != "" {
		s += ": " + e.Last
	}
	return s
}

// Unwrap returns the sentinels of the result (ErrRemote also gives
// choreo's ErrPeerLost).
func (e *Error) Unwrap() []error { return e.Result.sentinel() }

// unavailablef builds an error wrapping ErrUnavailable.
func unavailablef(format string, args ...any) error {
	return fmt.Errorf("nccl: "+format+": %w", append(args, ErrUnavailable)...)
}

// badArgf builds an error of op wrapping ErrInvalidArgument.
func badArgf(op, format string, args ...any) error {
	return fmt.Errorf("nccl: %s: %s: %w", op, fmt.Sprintf(format, args...), ErrInvalidArgument)
}

// closedf builds an error of op wrapping ErrClosed.
func closedf(op, format string, args ...any) error {
	return fmt.Errorf("nccl: %s: %s: %w", op, fmt.Sprintf(format, args...), ErrClosed)
}
