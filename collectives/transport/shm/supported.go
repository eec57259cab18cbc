package shm

// Supported reports whether this system can run the transport (Linux);
// elsewhere ConnectLinks fails with an error wrapping errors.ErrUnsupported.
func Supported() bool { return supported() == nil }
