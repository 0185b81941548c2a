package main

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

const metricsAddrUsage = "serve Prometheus metrics on /metrics at this TCP address (host:port; a bare port or :port means 127.0.0.1; off when empty)"

// usageError is a bad flag value: main exits 2 for it, as for a flag the
// flag package refuses, before anything has started.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// ExitCode implements the exit-code convention main checks.
func (e *usageError) ExitCode() int { return 2 }

// parseMetricsAddr validates --metrics-addr. Metrics stay on loopback
// unless an address is given: a bare port or ":port" binds 127.0.0.1, so
// turning them on never exposes a node's internals to the network by
// accident.
func parseMetricsAddr(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	bad := func(why string) error {
		return &usageError{fmt.Sprintf("--metrics-addr %q: %s (want host:port, :port or port)", v, why)}
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
