package remoting

import (
	"go.uber.org/zap"
	"google.golang.org/grpc/credentials"
)

// NewClientCredentials is the control plane's credentials for a raw gRPC
// client of the tests, proving secret and claiming the address claim.
func NewClientCredentials(secret []byte, claim string) credentials.TransportCredentials {
	return newControlCreds(secret, claim, DefaultPeerTimeout, zap.NewNop())
}
