package metrics

import (
	"os"
	"path/filepath"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
)

// EnvServiceName names the service a Server reports (the OpenTelemetry
// resource's service.name, target_info's service_name label); it wins
// over OpenTelemetry's own OTEL_SERVICE_NAME.
const EnvServiceName = "CHOREO_SERVICE_NAME"

// ServiceName is the service name a Server reports: CHOREO_SERVICE_NAME,
// else OTEL_SERVICE_NAME, else the program's name (its executable's base
// name, less a ".exe"), else "choreo". It is never OpenTelemetry's
// "unknown_service:..." default.
func ServiceName() string {
	for _, v := range []string{EnvServiceName, "OTEL_SERVICE_NAME"} {
		if name := strings.TrimSpace(os.Getenv(v)); name != "" {
			return name
		}
	}
	if len(os.Args) > 0 {
		name := filepath.Base(os.Args[0])
		name = strings.TrimSuffix(name, ".exe")
		if name != "" && name != "." && name != string(filepath.Separator) {
			return name
		}
	}
	return "choreo"
}

// serviceResource is OpenTelemetry's default resource (the SDK's
// attributes, OTEL_RESOURCE_ATTRIBUTES) with service.name set to name.
func serviceResource(name string) (*resource.Resource, error) {
	return resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", name)))
}
