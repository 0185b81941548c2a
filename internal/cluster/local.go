package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/internal/verdict"
)

// Local is a cluster on loopback: a witness and nodes 1..n as children of
// one binary, each node's files in Dir/nodeN, every child logged to
// Dir/<name>.log. Roles come from the witness.
type Local struct {
	Procs
	Witness netip.AddrPort
	// Arbiter, when set, is the nodes' --arbiter (etcd://...) in place
	// of --witness.
	Arbiter string
	Group   netip.AddrPort
	Nodes   map[uint32]netip.AddrPort
	// Dead marks the nodes the harness killed: a killed node's last
	// status file still says what it was.
	Dead map[uint32]bool
}

// ErrNoPrimary is WaitPrimary's timeout.
var ErrNoPrimary = errors.New("no node became primary")

// NewLocal picks free loopback ports for the witness, the replication
// group (239.groupNet.x.y) and nodes 1..nodes; nothing runs yet.
func NewLocal(bin, dir string, nodes int, groupNet byte) (*Local, error) {
	ports, err := FreeLoopbackPorts(2 + nodes)
	if err != nil {
		return nil, err
	}
	l := &Local{Procs: Procs{Bin: bin, Dir: dir}, Witness: Loopback(ports[0]),
		Group: RandomGroup(groupNet, ports[1]), Nodes: map[uint32]netip.AddrPort{}, Dead: map[uint32]bool{}}
	for i := range nodes {
		l.Nodes[uint32(i+1)] = Loopback(ports[2+i])
	}
	return l, nil
}

// NodeName is the process name of node id ("node1").
func NodeName(id uint32) string { return "node" + strconv.Itoa(int(id)) }

// NodeDir is node id's directory.
func (l *Local) NodeDir(id uint32) string { return filepath.Join(l.Dir, NodeName(id)) }

// NodeLog is node id's log file.
func (l *Local) NodeLog(id uint32) string { return filepath.Join(l.Dir, NodeName(id)+".log") }

// WitnessLog is the path of the witness's log.
func (l *Local) WitnessLog() string { return filepath.Join(l.Dir, "witness.log") }

// WitnessDir is the witness's state directory.
func (l *Local) WitnessDir() string { return filepath.Join(l.Dir, "witness") }

// StartWitness starts the witness on Witness (state in Dir/witness),
// pinned to cpus (nil: not pinned), with extra flags.
func (l *Local) StartWitness(cpus []int, extra ...string) error {
	args := []string{"witness", "--listen", l.Witness.String(), "--dir", l.WitnessDir()}
	return l.StartOn("witness", cpus, append(args, extra...)...)
}

// WitnessKeyArgs are the witness's flags for keyArgs (the --key flag and
// its file, or none): with a key, --nodes names every node of the
// cluster, whose keys it derives; without one, nothing.
func (l *Local) WitnessKeyArgs(keyArgs []string) []string {
	if len(keyArgs) == 0 {
		return nil
	}
	ids := make([]string, 0, len(l.Nodes))
	for _, id := range l.IDs() {
		ids = append(ids, strconv.Itoa(int(id)))
	}
	return append([]string{"--nodes", strings.Join(ids, ",")}, keyArgs...)
}

// NodeArgs are the flags node id needs to join this cluster: its id,
// directory and address, the group on lo, the witness and every other
// node as a peer.
func (l *Local) NodeArgs(id uint32) []string {
	args := []string{"--id", strconv.Itoa(int(id)), "--dir", l.NodeDir(id), "--listen", l.Nodes[id].String(),
		"--group", l.Group.String(), "--iface", "lo"}
	if l.Arbiter != "" {
		args = append(args, "--arbiter", l.Arbiter)
	} else {
		args = append(args, "--witness", l.Witness.String())
	}
	for _, peer := range l.IDs() {
		if peer != id {
			args = append(args, "--peer", fmt.Sprintf("%d=%s", peer, l.Nodes[peer]))
		}
	}
	return args
}

// IDs are the node ids, sorted.
func (l *Local) IDs() []uint32 { return slices.Sorted(maps.Keys(l.Nodes)) }

// Status reads node id's last status.
func (l *Local) Status(id uint32) (Status, error) { return ReadStatus(l.NodeDir(id)) }

// Primary is the live node that says it is primary at the highest epoch
// (0 for none).
func (l *Local) Primary() (uint32, Status) { return l.primaryAbove(0, 0) }

func (l *Local) primaryAbove(not uint32, minEpoch uint64) (uint32, Status) {
	var cands []Candidate
	for _, id := range l.IDs() {
		cands = append(cands, Candidate{ID: id, Dir: l.NodeDir(id), Alive: !l.Dead[id]})
	}
	return PrimaryOf(cands, not, minEpoch, false)
}

// Candidate is a node that may be primary: its directory (status.json)
// and whether it is alive (a killed node's last status still says what it
// was).
type Candidate struct {
	ID    uint32
	Dir   string
	Alive bool
}

// PrimaryOf is the live candidate other than not whose status says it is
// primary at the highest epoch >= minEpoch, holding the lease if
// needLease (0 for none).
func PrimaryOf(cands []Candidate, not uint32, minEpoch uint64, needLease bool) (uint32, Status) {
	var best uint32
	var bs Status
	for _, c := range cands {
		if c.ID == not || !c.Alive {
			continue
		}
		s, err := ReadStatus(c.Dir)
		if err != nil || s.Role != "primary" || s.Epoch < minEpoch || s.Epoch < bs.Epoch || (needLease && !s.Lease.Held) {
			continue
		}
		best, bs = c.ID, s
	}
	return best, bs
}

// WaitPrimary waits, polling every 20 ms for up to timeout, for a live
// node other than not that is primary at an epoch >= minEpoch. It returns
// ctx's error when ctx ends first, ErrNoPrimary at the timeout.
func (l *Local) WaitPrimary(ctx context.Context, not uint32, minEpoch uint64, timeout time.Duration) (uint32, Status, error) {
	var id uint32
	var st Status
	err := Poll(ctx, timeout, 20*time.Millisecond, func() bool {
		id, st = l.primaryAbove(not, minEpoch)
		return id != 0
	})
	if errors.Is(err, ErrTimeout) {
		err = ErrNoPrimary
	}
	return id, st, err
}

// Kill SIGKILLs node id and marks it dead.
func (l *Local) Kill(id uint32) {
	l.Signal(NodeName(id), syscall.SIGKILL)
	l.Dead[id] = true
}

// Verdict runs the verifier (seqbus verify's) on the client's record
// against every node's files, final the primary.
func (l *Local) Verdict(record string, final uint32, eng engine.Config) (*verdict.Result, error) {
	var dirs []string
	for _, id := range l.IDs() {
		dirs = append(dirs, l.NodeDir(id))
	}
	return verdict.Verify(verdict.Options{Records: []string{record}, Nodes: dirs, Primary: l.NodeDir(final), Engine: eng})
}
