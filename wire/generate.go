package wire

//go:generate buf generate --template buf.gen.yaml .
