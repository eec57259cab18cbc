package algo

// WithHierPartBytes sets the part size of the all-reduce in levels, so
// that a test's small payload runs as a pipeline of several parts.
func WithHierPartBytes(n int) Option { return func(o *Options) { o.hierPart = n } }
