package nccl

import "encoding/hex"

// uniqueIDBytes is NCCL_UNIQUE_ID_BYTES.
const uniqueIDBytes = 128

// UniqueID is an ncclUniqueId: the bootstrap address one rank makes with
// NewUniqueID and every rank of the communicator passes to InitRank. It is
// plain bytes, so it travels between processes as they are (MarshalText
// gives hex for environment variables and text protocols). A zero
// UniqueID was not made by NCCL; InitRank refuses it.
type UniqueID [uniqueIDBytes]byte

// NewUniqueID makes a unique id (ncclGetUniqueId). It starts NCCL's
// bootstrap root listener in this process, so the rank that calls it must
// stay alive until the communicator is made.
func NewUniqueID() (UniqueID, error) {
	var id UniqueID
	l, err := load()
	if err != nil {
		return id, err
	}
	if err := l.check("new unique id", "ncclGetUniqueId", l.ncclGetUniqueId(&id)); err != nil {
		return UniqueID{}, err
	}
	return id, nil
}

// IsZero reports whether id is all zero bytes.
func (id UniqueID) IsZero() bool { return id == UniqueID{} }

// MarshalText encodes id as 256 hex digits.
func (id UniqueID) MarshalText() ([]byte, error) {
	b := make([]byte, hex.EncodedLen(len(id)))
	hex.Encode(b, id[:])
	return b, nil
}

// UnmarshalText decodes what MarshalText made; errors wrap
// ErrInvalidArgument.
func (id *UniqueID) UnmarshalText(b []byte) error {
	if id == nil {
		return badArgf("unique id", "decode into nil id")
	}
	if len(b) != hex.EncodedLen(uniqueIDBytes) {
		return badArgf("unique id", "%d hex digits, want %d", len(b), hex.EncodedLen(uniqueIDBytes))
	}
	var v UniqueID
	if _, err := hex.Decode(v[:], b); err != nil {
		return badArgf("unique id", "%v", err)
	}
	*id = v
	return nil
}
