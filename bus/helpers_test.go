package bus

import (
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"testing"

	"go.uber.org/goleak"

	"github.com/seqbus/seqbus/internal/netns"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// transports names the two ways every Conn test runs, as wireguard-go's
// genTestPair(realSocket bool) does.
var transports = []struct {
	name string
	real bool
}{{"real", true}, {"mem", false}}

// privateHost returns a fresh network namespace when the test can make one
// (root on Linux), else nil: the caller then uses 127.0.0.1 on the host.
func privateHost(t testing.TB) *netns.Host {
	t.Helper()
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		return nil
	}
	return netns.New(t)
}

// inHost runs fn inside h, or directly when h is nil.
func inHost(t testing.TB, h *netns.Host, fn func() error) {
	t.Helper()
	var err error
	if h == nil {
		err = fn()
	} else {
		err = h.Do(fn)
	}
	if err != nil {
		t.Fatal(err)
	}
}

type endpoint interface {
	Conn
	CounterReader
	LocalAddr() netip.AddrPort
}

// genPair makes two unicast endpoints, on real sockets (in a private
// namespace when root) or on a fault-free in-memory network.
func genPair(t testing.TB, real bool, filter Filter) (a, b endpoint) {
	t.Helper()
	if real {
		h := privateHost(t)
		var ua, ub *UDP
		inHost(t, h, func() error {
			var err error
			if ua, err = ListenUnicast(UnicastConfig{}); err != nil {
				return err
			}
			ub, err = ListenUnicast(UnicastConfig{Filter: filter, Tuning: Tuning{RecvBufferBytes: 1 << 20}})
			return err
		})
		t.Cleanup(func() { ua.Close(); ub.Close() })
		return ua, ub
	}
	n := NewMemNetwork(1, Faults{})
	ma, err := n.Listen(netip.AddrPort{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mb, err := n.Listen(netip.AddrPort{}, filter)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ma.Close(); mb.Close() })
	return ma, mb
}

// batch is a reusable set of receive buffers.
type batch struct {
	bufs  [][]byte
	sizes []int
	from  []netip.AddrPort
}

func newBatch(count, size int) *batch {
	b := &batch{bufs: make([][]byte, count), sizes: make([]int, count), from: make([]netip.AddrPort, count)}
	for i := range b.bufs {
		b.bufs[i] = make([]byte, size)
	}
	return b
}

// payloads makes count datagrams; datagram i is "msg-<i>" padded to a size
// that varies with i.
func payloads(count int) [][]byte {
	out := make([][]byte, count)
	for i := range out {
		p := []byte(fmt.Sprintf("msg-%d|", i))
		for j := 0; j < i%37; j++ {
			p = append(p, byte('a'+j%26))
		}
		out[i] = p
	}
	return out
}
