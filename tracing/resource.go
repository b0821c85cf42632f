package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	sdkresource "go.opentelemetry.io/otel/sdk/resource"
)

// resource names the service and the node in every span; OTEL_RESOURCE_ATTRIBUTES
// and OTEL_SERVICE_NAME still apply on top.
func resource(nodeID string) *sdkresource.Resource {
	r, err := sdkresource.Merge(sdkresource.Default(), sdkresource.NewSchemaless(
		attribute.String("service.name", "floodgate"),
		attribute.String("service.instance.id", nodeID),
	))
	if err != nil {
		return sdkresource.Default()
	}
	if env, err := sdkresource.New(context.Background(), sdkresource.WithFromEnv()); err == nil {
		if m, err := sdkresource.Merge(r, env); err == nil {
			r = m
		}
	}
	return r
}
