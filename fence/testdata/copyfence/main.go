// Package main copies a fence.Fence by value; go vet must report it,
// because a copy would be a second handle that could release the fence.
package main

import "github.com/choreo-gpu/choreo/fence"

func use(f fence.Fence) { _ = f.ID() }

func main() {
	var f fence.Fence
	use(f)
}
