package remoting

import (
	"errors"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// checkMessage refuses a message protoactor's endpoint reader would panic
// on, or one that speaks for another node than from, the address the
// connection's handshake proved:
//   - a ConnectRequest must name from as its address;
//   - in a MessageBatch every type must be linked into this binary and
//     every index in range (protoactor dereferences them unchecked), every
//     sender PID must be of from, a Terminated must be for an actor of
//     from, a Watch or Unwatch must be by an actor of from, and no other
//     actor system message (Stop, Restart, ...) or auto-received one
//     (PoisonPill, ...) is accepted from a peer at all.
func checkMessage(m *remote.RemoteMessage, from string) error {
	switch t := m.MessageType.(type) {
	case *remote.RemoteMessage_ConnectRequest:
		sc := t.ConnectRequest.GetServerConnection()
		if sc == nil {
			return errors.New("connect request without a server connection")
		}
		if sc.Address != from {
			return fmt.Errorf("connect request names %q, not the connection's proven address %q", sc.Address, from)
		}
	case *remote.RemoteMessage_MessageBatch:
		return checkBatch(t.MessageBatch, from)
	}
	return nil
}

// kind is how checkBatch treats a message type.
type kind int

const (
	kindUser       kind = iota // any other message: delivered as is
	kindTerminated             // actor.Terminated: Who must be of the sender
	kindWatch                  // actor.Watch or actor.Unwatch: Watcher must be of the sender
	kindRefused                // another system or auto-received message
)

// kindOf classifies a registered message type.
func kindOf(mt protoreflect.MessageType) kind {
	switch mt.New().Interface().(type) {
	case *actor.Terminated:
		return kindTerminated
	case *actor.Watch, *actor.Unwatch:
		return kindWatch
	case actor.SystemMessage, actor.AutoReceiveMessage:
		return kindRefused
	}
	return kindUser
}

func checkBatch(b *remote.MessageBatch, from string) error {
	kinds := make([]kind, len(b.TypeNames))
	types := make([]protoreflect.MessageType, len(b.TypeNames))
	for i, name := range b.TypeNames {
		mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(name))
		if err != nil {
			return fmt.Errorf("batch type %d: unknown message type %q", i, name)
		}
		types[i], kinds[i] = mt, kindOf(mt)
	}
	for i, p := range b.Targets {
		if p == nil {
			return fmt.Errorf("batch target %d: empty", i)
		}
	}
	for i, p := range b.Senders {
		if p == nil {
			return fmt.Errorf("batch sender %d: empty", i)
		}
		if p.Address != from {
			return fmt.Errorf("batch sender %d is at %q, not the connection's proven address %q", i, p.Address, from)
		}
	}
	for i, e := range b.Envelopes {
		switch {
		case e == nil:
			return fmt.Errorf("envelope %d: empty", i)
		case e.TypeId < 0 || int(e.TypeId) >= len(b.TypeNames):
			return fmt.Errorf("envelope %d: type %d out of range", i, e.TypeId)
		case e.Target < 0 || int(e.Target) >= len(b.Targets):
			return fmt.Errorf("envelope %d: target %d out of range", i, e.Target)
		case e.Sender < 0 || int(e.Sender) > len(b.Senders):
			return fmt.Errorf("envelope %d: sender %d out of range", i, e.Sender)
		case e.SerializerId != 0: // the only one protoactor sends at this version
			return fmt.Errorf("envelope %d: serializer %d not accepted", i, e.SerializerId)
		}
		if err := checkSystem(e, b.TypeNames[e.TypeId], types[e.TypeId], kinds[e.TypeId], from); err != nil {
			return fmt.Errorf("envelope %d: %w", i, err)
		}
	}
	return nil
}

// checkSystem checks a system message's PID against from.
func checkSystem(e *remote.MessageEnvelope, name string, mt protoreflect.MessageType, k kind, from string) error {
	if k == kindUser {
		return nil
	}
	if k == kindRefused {
		return fmt.Errorf("%s from a remote peer not accepted", name)
	}
	m := mt.New().Interface()
	if err := proto.Unmarshal(e.MessageData, m); err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	var pid *actor.PID
	switch v := m.(type) {
	case *actor.Terminated:
		pid = v.Who
	case *actor.Watch:
		pid = v.Watcher
	case *actor.Unwatch:
		pid = v.Watcher
	}
	if pid == nil {
		return fmt.Errorf("%s without its PID", name)
	}
	if pid.Address != from {
		return fmt.Errorf("%s names an actor at %q, not of the connection's proven address %q", name, pid.Address, from)
	}
	return nil
}
