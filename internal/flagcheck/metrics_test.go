package flagcheck

import "testing"

func TestMetricsAddr(t *testing.T) {
	for in, want := range map[string]string{
		"": "", "9100": "127.0.0.1:9100", ":9100": "127.0.0.1:9100", "0": "127.0.0.1:0",
		"127.0.0.1:9100": "127.0.0.1:9100", "0.0.0.0:9100": "0.0.0.0:9100", "[::1]:9100": "[::1]:9100",
		"localhost:9100": "localhost:9100",
	} {
		if got, err := MetricsAddr(in); err != nil || got != want {
			t.Fatalf("%q: %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"abc", "1.2.3.4", "1.2.3.4:", ":99999", "host.example:80", "1.2.3.4:http", ":-1"} {
		if got, err := MetricsAddr(in); err == nil {
			t.Fatalf("%q accepted as %q", in, got)
		}
	}
}
