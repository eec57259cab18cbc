package darwincheck

import (
	"go/constant"
	"go/types"
)

// constantString returns a constant string value's Go string.
func constantString(tv types.TypeAndValue) string {
	if tv.Value.Kind() != constant.String {
		return tv.Value.ExactString()
	}
	return constant.StringVal(tv.Value)
}
