package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const certExpiryHelp = "When the certificate this node serves expires (Unix seconds), by the flag that names its file (tls-cert, peer-tls-cert): alert on it minus time()."

var certExpiryDesc = prometheus.NewDesc("floodgate_tls_certificate_expiration_timestamp_seconds", certExpiryHelp, []string{"cert"}, nil)

// certCollector reads the certificates' expiry at each scrape, so that a
// rotated certificate's shows at once.
type certCollector struct{ read func() map[string]time.Time }

// RegisterCertificates adds the expiry of the node's certificates, read by
// read at each scrape (keyed by the flag that names each file), to
// Registry. A process runs one node: call it once, and only with TLS on.
func RegisterCertificates(read func() map[string]time.Time) error {
	return Registry.Register(certCollector{read})
}

// Describe implements prometheus.Collector.
func (certCollector) Describe(ch chan<- *prometheus.Desc) { ch <- certExpiryDesc }

// Collect implements prometheus.Collector.
func (c certCollector) Collect(ch chan<- prometheus.Metric) {
	for flag, at := range c.read() {
		ch <- prometheus.MustNewConstMetric(certExpiryDesc, prometheus.GaugeValue, float64(at.Unix()), flag)
	}
}
