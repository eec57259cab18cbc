package streams

import (
	"context"
	"errors"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
)

// Sentinel errors of the stream actors.
var (
	// ErrClosed: the stream (or its runtime) is closed.
	ErrClosed = errors.New("stream closed")
	// ErrPanic: a task or actor panicked; the panic value is in the message.
	ErrPanic = errors.New("panic")
)

// Runtime is what the stream and fence actors need from the runtime that
// hosts them; *actors.Runtime implements it. Adopt registers something the
// runtime closes (in reverse order of adoption) when it closes, and fails
// with an error wrapping ErrClosed once the runtime is closing.
type Runtime interface {
	ActorSystem() *actor.ActorSystem
	Logger() *zap.Logger
	Adopt(name string, c Closer) error
}

// Closer is something with a bounded close.
type Closer interface {
	Close(ctx context.Context) error
}
