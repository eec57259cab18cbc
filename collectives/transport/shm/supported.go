package shm

// Supported reports whether this system can run the transport (Linux);
// elsewhere Connect fails with an error wrapping errors.ErrUnsupported.
func Supported() bool { return supported() == nil }
