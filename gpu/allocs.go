package gpu

// AllocCounter is implemented by devices that count the allocations they
// ask of their driver. A buffer served from the device's caches costs
// none, so the count stays still across a hot path that allocates nothing.
type AllocCounter interface {
	DriverAllocs() uint64
}
