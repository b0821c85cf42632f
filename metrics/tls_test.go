package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Each certificate's expiry is served in Unix seconds under the flag that
// names it, read at each scrape (a rotation shows at once).
func TestCertificateExpiry(t *testing.T) {
	at := map[string]time.Time{"tls-cert": time.Unix(1_900_000_000, 0), "peer-tls-cert": time.Unix(1_800_000_000, 0)}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(certCollector{func() map[string]time.Time { return at }})
	want := `# HELP floodgate_tls_certificate_expiration_timestamp_seconds ` + certExpiryHelp + `
# TYPE floodgate_tls_certificate_expiration_timestamp_seconds gauge
floodgate_tls_certificate_expiration_timestamp_seconds{cert="peer-tls-cert"} 1.8e+09
floodgate_tls_certificate_expiration_timestamp_seconds{cert="tls-cert"} 1.9e+09
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	at["tls-cert"] = time.Unix(1_950_000_000, 0)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(strings.Replace(want, "1.9e+09", "1.95e+09", 1))); err != nil {
		t.Fatal(err)
	}
}
