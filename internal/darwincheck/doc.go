// Package darwincheck type-checks darwin-only Go code (the Metal backend
// and what it imports, darwinkit included) on any machine, with the
// standard library only, and runs two lints go/types cannot do.
//
// The go command cannot vet or build darwin cgo code off a Mac: cgo needs
// Apple's SDK headers. darwincheck goes around cgo instead of through it:
//
//  1. go/build with GOOS=darwin, GOARCH=arm64 and CgoEnabled picks each
//     package's files as a Mac build would (GoFiles and CgoFiles); for
//     module packages go/build asks `go list` where they live, so darwinkit
//     comes from the module cache (`go mod download` puts it there).
//  2. go/parser parses them and go/types checks them with FakeImportC
//     (every C.x is accepted), arm64 sizes, and every dependency, std and
//     darwinkit alike, imported from source (function bodies skipped).
//     The packages asked for are checked with their function bodies.
//  3. Lints over the checked packages:
//     - trap: a use of a darwinkit function or method that panics on every
//     call. They are found in darwinkit's source, not listed by hand: a
//     function whose body calls objc.WrapAsProtocol with an argument of a
//     non-interface type (WrapAsProtocol panics unless its type argument
//     is an interface).
//     - sel: an objc.Sel("...") whose selector darwinkit's sources never
//     send (a typo, or an API darwinkit does not know), unless allowed.
//
// What it cannot see: the C side of cgo (argument counts and types, the
// preamble), linking, the arguments and result type of objc.Call (it takes
// ...any), Objective-C run-time behaviour, retain/release balance, and MSL.
package darwincheck
