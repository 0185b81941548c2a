package node

import (
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/transport"
)

// TestSendOnlySocketsDrained: datagrams injected into a running primary's
// replication sender (which only sends) are drained on the ticker and
// counted in the status (node.DropSendOnly, multicast_send.Drops), instead
// of sitting in a 16 MB buffer nobody reads (issue 15, item 8).
func TestSendOnlySocketsDrained(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := newCluster(t, 2)
	defer c.closeAll()
	tuning := bus.Tuning{RecvBufferBytes: 16 << 20}
	n := c.start(1, func(cfg *nodeconfig.Config) { cfg.Network = transport.UDPNetwork{Tuning: tuning} })
	var sender bus.Report
	for _, r := range n.SocketReports() {
		if r.SendOnly {
			sender = r
		} else if r.RecvBufferBytesGranted < tuning.RecvBufferBytes {
			t.Logf("receiver granted %d of %d bytes (not root?)", r.RecvBufferBytesGranted, tuning.RecvBufferBytes)
		}
	}
	if !sender.Local.IsValid() {
		t.Fatal("no send-only socket among the node's sockets")
	}
	if sender.RecvBufferBytesGranted > 16<<10 {
		t.Fatalf("send-only socket granted a %d-byte receive buffer", sender.RecvBufferBytesGranted)
	}
	inj, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(sender.Local))
	if err != nil {
		t.Fatal(err)
	}
	defer inj.Close()
	const injected = 20
	for i := uint64(1); i <= injected; i++ {
		if _, err := inj.Write(make([]byte, 64)); err != nil {
			t.Fatal(err)
		}
		// One at a time, so the tiny buffer never overflows and each one
		// is counted as drained; bounded wait, not a timing assertion.
		deadline := time.Now().Add(10 * time.Second)
		for n.Status().Node.DropSendOnly < i {
			if time.Now().After(deadline) {
				t.Fatalf("injected %d, counted %d", i, n.Status().Node.DropSendOnly)
			}
			time.Sleep(time.Millisecond)
		}
	}
	st := n.Status()
	if st.Node.DropSendOnly != injected || st.MulticastSend.Drops.SendOnly != injected {
		t.Fatalf("DropSendOnly %d (socket %d), injected %d", st.Node.DropSendOnly, st.MulticastSend.Drops.SendOnly, injected)
	}
}
