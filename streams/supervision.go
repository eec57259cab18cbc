package streams

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
)

// failable is a message that can be told it will never be processed
// normally: the supervisor calls fail with the panic turned into an error.
type failable interface {
	fail(err error)
}

// panicStrategy is the guardian strategy of every stream actor: a panic
// while processing a message becomes an error wrapping ErrPanic on that
// message (its task's or command's done callback), is logged, and the actor
// resumes with its next message.
type panicStrategy struct {
	log *zap.Logger
}

// HandleFailure implements actor.SupervisorStrategy.
func (p panicStrategy) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID,
	_ *actor.RestartStatistics, reason interface{}, message interface{}) {
	err := fmt.Errorf("%w: %v", ErrPanic, reason)
	p.log.Error("stream actor panicked; failing its message and resuming",
		zap.String("actor", child.GetId()), zap.Any("reason", reason))
	if m, ok := message.(failable); ok {
		m.fail(err)
	}
	sup.ResumeChildren(child)
}
