package flagcheck

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// MetricsAddrUsage is --metrics-addr's help, the same for the node and
// the witness.
const MetricsAddrUsage = "serve Prometheus metrics on /metrics at this TCP address (host:port; a bare port or :port means 127.0.0.1; off when empty)"

// MetricsAddr validates --metrics-addr and returns the address to listen on. Metrics stay on loopback
// unless an address is given: a bare port or ":port" binds 127.0.0.1, so
// turning them on never exposes a node's internals to the network by
// accident.
func MetricsAddr(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	bad := func(why string) error {
		return Usagef("--metrics-addr %q: %s (want host:port, :port or port)", v, why)
	}
	if !strings.Contains(v, ":") {
		v = ":" + v
	}
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return "", bad(err.Error())
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || (p == 0 && port != "0") {
		return "", bad("port must be a number 0..65535")
	}
	switch host {
	case "":
		host = "127.0.0.1"
	case "localhost":
	default:
		if _, err := netip.ParseAddr(host); err != nil {
			return "", bad("host must be an IP address or localhost")
		}
	}
	return net.JoinHostPort(host, port), nil
}
