package node

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/transport"
)

// TestMissingInterfaceRefusedBeforeAnything: a node configured on an
// interface the host lacks fails with an error naming it and the host's
// interfaces, and has created nothing (before, New opened the journal,
// then panicked closing a nil socket held in a non-nil interface).
func TestMissingInterfaceRefusedBeforeAnything(t *testing.T) {
	c := newCluster(t, 1)
	cfg := c.config(1)
	cfg.Interface = "sbnope0"
	cfg.Dir = filepath.Join(t.TempDir(), "node1")
	if err := cfg.Validate(); err == nil {
		t.Fatal("Validate accepted a missing interface")
	}
	n, err := New(cfg)
	var ie *bus.InterfaceError
	if err == nil || !errors.Is(err, nodeconfig.ErrConfig) || !errors.As(err, &ie) || ie.Name != "sbnope0" {
		if n != nil {
			n.Close()
		}
		t.Fatalf("New on a missing interface: err = %v, want ErrConfig with a bus.InterfaceError", err)
	}
	if !strings.Contains(err.Error(), "lo") {
		t.Fatalf("err %q does not list the host's interfaces", err)
	}
	if _, err := os.Stat(cfg.Dir); !os.IsNotExist(err) {
		t.Fatalf("the journal directory was created: %v", err)
	}
}

// TestUDPNetworkFailureIsNilEndpoint: a socket that fails to open comes
// back as a nil Endpoint, not a non-nil interface holding a nil *bus.UDP
// (which the cleanup would Close, and panic).
func TestUDPNetworkFailureIsNilEndpoint(t *testing.T) {
	group := netip.MustParseAddrPort("239.77.9.9:7199")
	if ep, err := (transport.UDPNetwork{}).MulticastReceiver(group, "sbnope0", nil); err == nil || ep != nil {
		t.Fatalf("receiver on a missing interface: %v, %#v", err, ep)
	}
	if ep, err := (transport.UDPNetwork{}).MulticastSender(group, "sbnope0", 0); err == nil || ep != nil {
		t.Fatalf("sender on a missing interface: %v, %#v", err, ep)
	}
	if ep, err := (transport.UDPNetwork{}).Unicast(netip.MustParseAddrPort("192.0.2.1:1"), nil); err == nil || ep != nil {
		t.Fatalf("unicast on an address not ours: %v, %#v", err, ep)
	}
}
