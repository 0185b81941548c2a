package witness

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"net/netip"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/wire"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testLeaseNs is short so restart quarantines pass quickly in real time.
const testLeaseNs = int64(200 * time.Millisecond)

func testConfig() Config {
	return Config{
		Arbiter: arbiter.Config{
			LeaseDurationNs: testLeaseNs,
			RenewIntervalNs: int64(50 * time.Millisecond),
			MarginNs:        int64(30 * time.Millisecond),
			RetryNs:         int64(20 * time.Millisecond),
		},
		Node: 99,
	}
}

var nodeAddr = netip.MustParseAddrPort("127.0.0.1:4000")

// memStore is an in-memory state store; fail makes the next writes fail.
// epoch mirrors state.Epoch and writes lists the epoch of each write, for
// the tests that only look at epochs.
type memStore struct {
	state  arbiter.PersistentState
	epoch  uint64
	found  bool
	writes []uint64
	states []arbiter.PersistentState
	fail   bool
	// onStore runs before each write (success or failure).
	onStore func(epoch uint64)
}

func (m *memStore) Load() (arbiter.PersistentState, bool, error) {
	st := m.state
	if st == (arbiter.PersistentState{}) {
		st.Epoch = m.epoch
	}
	return st, m.found, nil
}

func (m *memStore) Save(state arbiter.PersistentState) error {
	if m.onStore != nil {
		m.onStore(state.Epoch)
	}
	if m.fail {
		return ErrPersist
	}
	m.state, m.epoch, m.found = state, state.Epoch, true
	m.writes = append(m.writes, state.Epoch)
	m.states = append(m.states, state)
	return nil
}

// testCore is a Core with its store, driven the way Server drives it
// (stepAndPersist) but with time and delivery in the test's hands.
type testCore struct {
	*Core
	store Store
}

// newTestCore builds a core over store at time 0, restored from what the
// store loads, as New does from the state file.
func newTestCore(cfg Config, store Store) (*testCore, error) {
	state, found, err := store.Load()
	if err != nil {
		return nil, err
	}
	c, err := NewCore(cfg, state, found, 0)
	if err != nil {
		return nil, err
	}
	return &testCore{Core: c, store: store}, nil
}

// newTestServer builds a socket-free witness core over store.
func newTestServer(t testing.TB, store Store) *testCore {
	t.Helper()
	s, err := newTestCore(testConfig(), store)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// handle answers one datagram as Server.handle does.
func (c *testCore) handle(pkt []byte, from netip.AddrPort, nowNs int64) []byte {
	return stepAndPersist(c.Core, c.store, pkt, from, nowNs)
}

// Status is the lease at the latest time the core has seen.
func (c *testCore) Status() arbiter.Status { return c.Core.Status(c.lastNowNs) }

func acquireFrame(t testing.TB, node arbiter.NodeID, id uint64) []byte {
	t.Helper()
	b, err := AppendRequest(nil, arbiter.Request{ID: id, Kind: arbiter.RequestAcquire, Node: node}, 7)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func releaseFrame(t testing.TB, node arbiter.NodeID, id, epoch uint64) []byte {
	t.Helper()
	return requestFrame(t, arbiter.RequestRelease, node, id, epoch)
}

func renewFrame(t testing.TB, node arbiter.NodeID, id, epoch uint64) []byte {
	t.Helper()
	return requestFrame(t, arbiter.RequestRenew, node, id, epoch)
}

func requestFrame(t testing.TB, kind arbiter.RequestKind, node arbiter.NodeID, id, epoch uint64) []byte {
	t.Helper()
	b, err := AppendRequest(nil, arbiter.Request{ID: id, Kind: kind, Node: node, Epoch: epoch}, 7)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// renewInSyncFrame is a renew carrying a proposal of members on base.
func renewInSyncFrame(t testing.TB, node arbiter.NodeID, id, epoch, base uint64, members ...arbiter.NodeID) []byte {
	t.Helper()
	p := arbiter.InSyncProposal{BaseVersion: base, N: len(members)}
	copy(p.Members[:], members)
	b, err := AppendRequestInSync(nil, arbiter.Request{ID: id, Kind: arbiter.RequestRenew, Node: node, Epoch: epoch}, 7, p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// inSync builds the expected set.
func inSync(members ...arbiter.NodeID) arbiter.InSyncSet {
	s, ok := arbiter.MakeInSyncSet(members, arbiter.NodeNone)
	if !ok {
		panic("bad test set")
	}
	return s
}

// mustReply decodes a reply the server returned, failing if there is none.
func mustReply(t testing.TB, pkt []byte) arbiter.Reply {
	t.Helper()
	if pkt == nil {
		t.Fatal("no reply")
	}
	r, err := ParseReply(pkt)
	if err != nil {
		t.Fatalf("server sent an undecodable reply: %v", err)
	}
	return r
}

// testPair is a server on a socket plus a node socket that talks to it.
type testPair struct {
	server  *Server
	node    bus.Conn
	witness netip.AddrPort
	dir     string
	real    bool
	mem     *bus.MemNetwork
	// leaseNs is the lease of the servers it starts (genTestPair sets
	// pairLeaseNs): these run on the real clock, so every step a test
	// expects inside one lease or quarantine must fit in it however long
	// a loaded machine holds the test off its CPU.
	leaseNs int64
}

// pairLeaseNs is the lease of a genTestPair server: long against any
// scheduling stall (testLeaseNs, 200 ms, was not: a stall between a grant
// and the holder's next request made that request a new term).
const pairLeaseNs = int64(5 * time.Second)

var transports = []struct {
	name string
	real bool
}{{"mem", false}, {"real", true}}

// listen opens a unicast endpoint, real (127.0.0.1, ephemeral port) or on
// the in-memory network.
func listen(t testing.TB, real bool, mem *bus.MemNetwork) (bus.Conn, netip.AddrPort) {
	t.Helper()
	if real {
		u, err := bus.ListenUnicast(bus.UnicastConfig{})
		if err != nil {
			t.Fatal(err)
		}
		return u, u.LocalAddr()
	}
	c, err := mem.Listen(netip.AddrPort{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, c.LocalAddr()
}

// genTestPair starts a server in dir (a fresh temp dir when "") and a node
// endpoint, in the style of wireguard-go's genTestPair(realSocket).
func genTestPair(t testing.TB, real bool, dir string) *testPair {
	t.Helper()
	p := &testPair{real: real, dir: dir, leaseNs: pairLeaseNs}
	if dir == "" {
		p.dir = t.TempDir()
	}
	if !real {
		p.mem = bus.NewMemNetwork(1, bus.Faults{})
	}
	p.startServer(t)
	p.node, _ = listen(t, real, p.mem)
	t.Cleanup(func() {
		p.node.Close()
		if err := p.server.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// startServer opens a new witness socket and server on p.dir.
func (p *testPair) startServer(t testing.TB) {
	t.Helper()
	conn, addr := listen(t, p.real, p.mem)
	cfg := testConfig()
	if p.leaseNs != 0 {
		cfg.Arbiter.LeaseDurationNs = p.leaseNs
	}
	s, err := New(cfg, conn, p.dir)
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	p.server, p.witness = s, addr
}

// restart closes the server and starts a new one on the same directory.
func (p *testPair) restart(t testing.TB) {
	t.Helper()
	if err := p.server.Close(); err != nil {
		t.Fatal(err)
	}
	p.startServer(t)
}

// roundTrip sends pkt to the witness and waits for one reply.
func (p *testPair) roundTrip(t testing.TB, pkt []byte) arbiter.Reply {
	t.Helper()
	if err := p.node.Send([][]byte{pkt}, p.witness); err != nil {
		t.Fatal(err)
	}
	// Generous: a loaded machine can hold either end off its CPU for
	// seconds, and a reply that comes is all this waits for.
	r, ok := p.receive(t, 10*time.Second)
	if !ok {
		t.Fatal("no reply from the witness within 10 s")
	}
	return r
}

// receive waits up to wait for one reply from the witness.
func (p *testPair) receive(t testing.TB, wait time.Duration) (arbiter.Reply, bool) {
	t.Helper()
	bufs := [][]byte{make([]byte, 2048)}
	sizes := []int{0}
	from := []netip.AddrPort{{}}
	deadline := time.Now().Add(wait)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return arbiter.Reply{}, false
		}
		n, err := p.node.Receive(bufs, sizes, from, left)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			continue
		}
		if from[0] != p.witness {
			t.Fatalf("reply from %v, witness is %v", from[0], p.witness)
		}
		r, err := ParseReply(bufs[0][:sizes[0]])
		if err != nil {
			t.Fatalf("undecodable reply: %v", err)
		}
		return r, true
	}
}

// queryFrame builds a LEASE_QUERY.
func queryFrame(id uint64) []byte { return AppendQuery(nil, 0, 7, id) }

// wireZeroAddr is an invalid sender address.
var wireZeroAddr netip.AddrPort

// errOther matches no wire sentinel.
var errOther = errors.New("something else")

// reseal recomputes a frame's CRC32C after a test edited it, so the edit
// reaches the layout checks behind the checksum.
func reseal(b []byte) []byte {
	c := crc32.Update(0, castagnoli, b[:36])
	c = crc32.Update(c, castagnoli, b[wire.HeaderLen:])
	binary.LittleEndian.PutUint32(b[36:], c)
	return b
}

// newMemConn opens a port on a private in-memory network.
func newMemConn(t testing.TB) bus.Conn {
	t.Helper()
	c, err := bus.NewMemNetwork(1, bus.Faults{}).Listen(netip.AddrPort{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
