// Package wire holds the control plane's message types: the protobuf
// messages ranks send each other through protoactor remoting (Hello, Roster,
// Refused, Leave, Lost, GrowAsk, GrowAnswer, Ping, Pong). Remoting carries
// only protobuf messages, and a receiver must link every type a peer may send it, so every control
// message lives here, in one file every process links (wire.proto).
//
// It imports nothing of choreo: every layer may import it.
//
// wire.pb.go is generated and committed; never edit it by hand. Regenerate
// it after changing wire.proto with
//
//	go generate ./wire
//
// which runs buf (github.com/bufbuild/buf, a protobuf compiler written in
// Go) with protoc-gen-go v1.33.0, both found on PATH:
//
//	go install github.com/bufbuild/buf/cmd/buf@v1.75.0
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.33.0
package wire
