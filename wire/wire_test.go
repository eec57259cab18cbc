package wire_test

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/choreo-gpu/choreo/wire"
)

// TestTypesRegistered: remoting looks a received type up by its full name
// in the global registry, so every message must be there under choreo.wire.
func TestTypesRegistered(t *testing.T) {
	for _, m := range []proto.Message{&wire.Hello{}, &wire.Member{}, &wire.Roster{}, &wire.Refused{}, &wire.Leave{}, &wire.Lost{}, &wire.Ping{}, &wire.Pong{}} {
		name := m.ProtoReflect().Descriptor().FullName()
		if name.Parent() != protoreflect.FullName("choreo.wire") {
			t.Errorf("%s: not in package choreo.wire", name)
		}
		if _, err := protoregistry.GlobalTypes.FindMessageByName(name); err != nil {
			t.Errorf("%s: not registered: %v", name, err)
		}
	}
}

func TestRosterRoundTrip(t *testing.T) {
	in := &wire.Roster{Group: 7, Version: 1, Members: []*wire.Member{
		{Rank: 0, ControlAddr: "10.0.0.1:7000", DataAddr: "10.0.0.1:7001", Host: "a", Pid: 11, Transport: "auto"},
		{Rank: 1, ControlAddr: "10.0.0.2:7000", DataAddr: "10.0.0.2:7001", Host: "b", Pid: 12, Transport: "tcp"},
	}}
	b, err := proto.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	out := &wire.Roster{}
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(in, out) {
		t.Fatalf("round trip: got %v, want %v", out, in)
	}
}

// TestHelloCarriesTransport: the transport a rank asks for survives the
// wire, and a Hello without one (an older sender) reads as empty.
func TestHelloCarriesTransport(t *testing.T) {
	for _, want := range []string{"shm", ""} {
		b, err := proto.Marshal(&wire.Hello{Rank: 2, Size: 3, Transport: want})
		if err != nil {
			t.Fatal(err)
		}
		var out wire.Hello
		if err := proto.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		if out.GetTransport() != want || out.GetRank() != 2 {
			t.Fatalf("got %v, want transport %q", &out, want)
		}
	}
}
