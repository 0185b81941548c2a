package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/etcdarb"
)

// EtcdBinary is Debian's etcd-server (scripts/setup installs it).
const EtcdBinary = "/usr/bin/etcd"

// Etcd is a 3-member etcd cluster on 127.0.0.1, its members children of
// Procs named etcd1..etcd3, each with its data in Dir/etcdN.data: the
// lease arbiter of a run that does not use the witness (`seqbus node
// --arbiter etcd://...`). A member killed and started again rejoins on
// its data.
type Etcd struct {
	procs   *Procs
	members []etcdMember
	initial string
	// HeartbeatMs and ElectionMs are etcd's raft timing.
	HeartbeatMs, ElectionMs int
}

type etcdMember struct {
	name, dataDir, clientURL, peerURL string
}

// EtcdMembers is the cluster's size.
const EtcdMembers = 3

// StartEtcd starts the three members under p with the raft timing
// given (etcdarb recommends a 25 ms heartbeat and a 250 ms election
// timeout with a 2 s lease) and waits, at most bound, until every member
// reports itself healthy.
func StartEtcd(ctx context.Context, p *Procs, heartbeatMs, electionMs int, bound time.Duration) (*Etcd, error) {
	if _, err := os.Stat(EtcdBinary); err != nil {
		return nil, fmt.Errorf("etcd: %s missing (scripts/setup installs etcd-server): %w", EtcdBinary, err)
	}
	ports, err := freeTCPPorts(2 * EtcdMembers)
	if err != nil {
		return nil, err
	}
	e := &Etcd{procs: p, HeartbeatMs: heartbeatMs, ElectionMs: electionMs}
	var initial []string
	for i := range EtcdMembers {
		m := etcdMember{name: fmt.Sprintf("etcd%d", i+1), clientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]),
			peerURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1])}
		m.dataDir = filepath.Join(p.Dir, m.name+".data")
		e.members = append(e.members, m)
		initial = append(initial, m.name+"="+m.peerURL)
	}
	e.initial = strings.Join(initial, ",")
	for i := range e.members {
		if err := e.StartMember(i); err != nil {
			return nil, err
		}
	}
	if err := Poll(ctx, bound, 50*time.Millisecond, func() bool { return e.Healthy() == EtcdMembers }); err != nil {
		return nil, fmt.Errorf("etcd: %d of %d members healthy after %v (logs in %s): %w", e.Healthy(), EtcdMembers, bound, p.Dir, err)
	}
	return e, nil
}

// Name is member i's process name (etcd1..etcd3).
func (e *Etcd) Name(i int) string { return e.members[i].name }

// StartMember starts member i: new, or again on its data after a kill.
func (e *Etcd) StartMember(i int) error {
	m := e.members[i]
	spec := Spec{Name: m.name, Bin: EtcdBinary, DieWithParent: true, Args: []string{
		"--name", m.name, "--data-dir", m.dataDir,
		"--listen-client-urls", m.clientURL, "--advertise-client-urls", m.clientURL,
		"--listen-peer-urls", m.peerURL, "--initial-advertise-peer-urls", m.peerURL,
		"--initial-cluster", e.initial, "--initial-cluster-state", "new", "--initial-cluster-token", "seqbus-" + filepath.Base(e.procs.Dir),
		"--heartbeat-interval", fmt.Sprint(e.HeartbeatMs), "--election-timeout", fmt.Sprint(e.ElectionMs),
		"--logger", "zap", "--log-outputs", "stderr",
	}}
	return e.procs.StartSpec(spec)
}

// Kill SIGKILLs member i and waits, at most 5 s, for it to be gone.
func (e *Etcd) Kill(i int) error {
	e.procs.Signal(e.Name(i), syscall.SIGKILL)
	_, err := e.procs.Wait(e.Name(i), 5*time.Second)
	return err
}

// Endpoints are the members' client URLs.
func (e *Etcd) Endpoints() []string {
	eps := make([]string, 0, len(e.members))
	for _, m := range e.members {
		eps = append(eps, m.clientURL)
	}
	return eps
}

// URL is the nodes' --arbiter: etcd://host:port,host:port,host:port.
func (e *Etcd) URL() string {
	hosts := make([]string, 0, len(e.members))
	for _, m := range e.members {
		hosts = append(hosts, strings.TrimPrefix(m.clientURL, "http://"))
	}
	return "etcd://" + strings.Join(hosts, ",")
}

// Healthy counts the members whose /health says so (a member answers
// true only while it sees a leader and can serve).
func (e *Etcd) Healthy() int {
	n := 0
	hc := http.Client{Timeout: 300 * time.Millisecond}
	for _, m := range e.members {
		resp, err := hc.Get(m.clientURL + "/health")
		if err != nil {
			continue
		}
		var buf [128]byte
		k, _ := resp.Body.Read(buf[:])
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && strings.Contains(string(buf[:k]), `"health":"true"`) {
			n++
		}
	}
	return n
}

// freeTCPPorts is n distinct TCP ports on 127.0.0.1, free a moment ago,
// drawn below the kernel's ephemeral range as FreeLoopbackPort's are.
func freeTCPPorts(n int) ([]int, error) {
	lo := ephemeralLow()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > 2000 || lo <= minPickPort+1000 {
			return nil, fmt.Errorf("etcd: no free TCP port below %d", lo)
		}
		p := minPickPort + rand.IntN(lo-minPickPort)
		l, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		l.Close()
		if !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	return ports, nil
}

// FollowEtcd asks the etcd arbiter who holds the lease at the client's
// witness query cadence (Client.QueryEvery: 100 ms, 10 ms while answers
// are late) and points the client at a new holder,
// resending what is in flight there. It returns a function that stops it.
func FollowEtcd(endpoints []string, stream uint16, nodes map[uint32]netip.AddrPort, cl *client.Client) (func(), error) {
	if len(nodes) == 0 {
		return nil, fmt.Errorf("--arbiter needs --node id=host:port for every node")
	}
	q, err := etcdarb.NewQuerier(etcdarb.Config{Endpoints: endpoints, Stream: stream})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		var holder arbiter.NodeID
		var epoch uint64
		// Tick at the client's fastest cadence; ask etcd at the one the
		// client says (every 100 ms, every 10 while answers are late,
		// every 2 after its primary said NOT_LEADING).
		t := time.NewTicker(client.QueryEveryMin)
		defer t.Stop()
		var last time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if time.Since(last) < cl.QueryEvery() {
				continue
			}
			last = time.Now()
			qctx, qcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			h, e, _, err := q.Query(qctx)
			qcancel()
			if err != nil || h == arbiter.NodeNone || (h == holder && e == epoch) || e < epoch {
				continue
			}
			if addr, ok := nodes[uint32(h)]; ok {
				holder, epoch = h, e
				cl.LearnEpoch(e) // etcd granted e only after every older lease ended
				if addr != cl.Primary() {
					cl.SetPrimary(addr)
				}
			}
		}
	}()
	return func() { cancel(); <-done; q.Close() }, nil
}
