// Package wire holds the control plane's message types: the protobuf
// messages ranks send each other through protoactor remoting (Hello, Roster,
// Refused, Leave, Ping, Pong). Remoting carries only protobuf messages, and
// a receiver must link every type a peer may send it, so every control
// message lives here, in one file every process links (wire.proto).
//
// It imports nothing of choreo: every layer may import it.
//
// wire.pb.go is generated and committed; never edit it by hand. Regenerate
// it after changing wire.proto with
//
//	go generate ./wire
//
// which runs protoc (3.21 or later) with protoc-gen-go v1.33.0 (the version
// of google.golang.org/protobuf in go.mod), both found on PATH:
//
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.33.0
package wire
