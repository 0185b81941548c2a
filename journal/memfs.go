package journal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"sort"
	"sync"
)

// ErrCrashed is returned by every method of a MemFS file opened before the
// last MemFS.Crash: the process that held it is gone.
var ErrCrashed = errors.New("journal: memfs file handle from before a crash")

// MemFS is an in-memory FS that models a disk with a volatile write cache,
// for tests and the deterministic simulator.
//
// The model:
//   - Every file has a durable image (as of its last Sync) and a list of
//     writes and truncations made since, in order.
//   - Creations, removals and renames are durable only after SyncDir of
//     their directory; until then they sit in an ordered log.
//   - Crash(seed) keeps a random prefix of each file's unsynced operations,
//     tears the first dropped write at a random byte (a prefix of it reaches
//     the disk), keeps a random prefix of the unsynced namespace log, and
//     invalidates every open handle.
//
// Unsynced operations persist in order; real disks may also reorder them
// (see doc.go on what recovery does then). Directories made by MkdirAll are
// durable at once. Memory grows with the unsynced operations, which is
// fine for a test double. Safe for concurrent use.
type MemFS struct {
	mu      sync.Mutex
	dirs    map[string]bool
	names   map[string]*memInode // namespace as the running process sees it
	durable map[string]*memInode // namespace as the disk holds it
	nsLog   []memNSOp
	gen     uint64
	syncErr error
}

var _ FS = (*MemFS)(nil)

type memInode struct {
	data    []byte
	synced  []byte
	pending []memOp
}

// memOp is a write (data != nil or an empty write) or, when truncate is
// set, a size change to sizeBytes.
type memOp struct {
	offset    int64
	data      []byte
	truncate  bool
	sizeBytes int64
}

type memNSOp struct {
	dir     string
	name    string // the name created, removed or renamed to
	oldName string // rename source; "" otherwise
	inode   *memInode
	remove  bool
}

// NewMemFS returns an empty MemFS with the root directory "/" and ".".
func NewMemFS() *MemFS {
	return &MemFS{
		dirs:    map[string]bool{"/": true, ".": true},
		names:   map[string]*memInode{},
		durable: map[string]*memInode{},
	}
}

// SetSyncError makes every later File.Sync and SyncDir fail with err
// (nil restores success), to test fsync-failure handling.
func (m *MemFS) SetSyncError(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.syncErr = err
}

// Crash simulates a power loss: unsynced data and namespace changes are
// lost except for a seeded random prefix, and the first dropped write may
// be torn. Every File opened before the crash returns ErrCrashed.
func (m *MemFS) Crash(seed uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	names := make(map[string]*memInode, len(m.durable))
	for k, v := range m.durable {
		names[k] = v
	}
	keep := rng.IntN(len(m.nsLog) + 1)
	for _, op := range m.nsLog[:keep] {
		applyNSOp(names, op)
	}
	seen := map[*memInode]bool{}
	inodes := make([]*memInode, 0, len(m.names)+len(names))
	for _, set := range []map[string]*memInode{m.names, names} {
		keys := make([]string, 0, len(set))
		for k := range set {
			keys = append(keys, k)
		}
		sort.Strings(keys) // map order must not leak into the seeded outcome
		for _, k := range keys {
			if in := set[k]; !seen[in] {
				seen[in] = true
				inodes = append(inodes, in)
			}
		}
	}
	for _, in := range inodes {
		kept := rng.IntN(len(in.pending) + 1)
		img := in.synced
		for _, op := range in.pending[:kept] {
			img = applyOp(img, op)
		}
		if kept < len(in.pending) && !in.pending[kept].truncate {
			torn := in.pending[kept]
			torn.data = torn.data[:rng.IntN(len(torn.data)+1)]
			img = applyOp(img, torn)
		}
		in.data = img
		in.synced = append([]byte(nil), img...)
		in.pending = nil
	}
	m.names = names
	m.durable = make(map[string]*memInode, len(names))
	for k, v := range names {
		m.durable[k] = v
	}
	m.nsLog = nil
	m.gen++
}

// ReadFileForTest returns a copy of name's current contents.
func (m *MemFS) ReadFileForTest(name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	in, ok := m.names[path.Clean(name)]
	if !ok {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrNotExist}
	}
	return append([]byte(nil), in.data...), nil
}

// WriteFileForTest creates or replaces name with data, durably.
func (m *MemFS) WriteFileForTest(name string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = path.Clean(name)
	if !m.dirs[path.Dir(name)] {
		return &fs.PathError{Op: "write", Path: name, Err: fs.ErrNotExist}
	}
	in := &memInode{data: append([]byte(nil), data...), synced: append([]byte(nil), data...)}
	m.names[name] = in
	m.durable[name] = in
	return nil
}

func applyNSOp(names map[string]*memInode, op memNSOp) {
	switch {
	case op.remove:
		delete(names, op.name)
	case op.oldName != "":
		delete(names, op.oldName)
		names[op.name] = op.inode
	default:
		names[op.name] = op.inode
	}
}

// applyOp applies op to img in place (img is owned by the caller) and
// returns the new image. Bytes exposed by growing are always zeroed, even
// when the backing array still holds old data past len(img).
func applyOp(img []byte, op memOp) []byte {
	if op.truncate {
		if op.sizeBytes <= int64(len(img)) {
			return img[:op.sizeBytes]
		}
		return growZeroed(img, op.sizeBytes)
	}
	if end := op.offset + int64(len(op.data)); end > int64(len(img)) {
		img = growZeroed(img, end)
	}
	copy(img[op.offset:], op.data)
	return img
}

func growZeroed(img []byte, sizeBytes int64) []byte {
	if sizeBytes <= int64(cap(img)) {
		old := len(img)
		img = img[:sizeBytes]
		clear(img[old:])
		return img
	}
	grown := make([]byte, sizeBytes, sizeBytes+sizeBytes/4)
	copy(grown, img)
	return grown
}

// OpenFile implements FS. Supported flags: O_RDONLY, O_WRONLY, O_RDWR,
// O_CREATE, O_EXCL, O_TRUNC.
func (m *MemFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = path.Clean(name)
	dir := path.Dir(name)
	if !m.dirs[dir] {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	in, ok := m.names[name]
	switch {
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case !ok && flag&os.O_CREATE == 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case !ok:
		in = &memInode{}
		m.names[name] = in
		m.nsLog = append(m.nsLog, memNSOp{dir: dir, name: name, inode: in})
	}
	f := &memFile{fs: m, inode: in, gen: m.gen, name: name, writable: flag&(os.O_WRONLY|os.O_RDWR) != 0}
	if flag&os.O_TRUNC != 0 && f.writable {
		f.opLocked(memOp{truncate: true})
	}
	return f, nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = path.Clean(name)
	if _, ok := m.names[name]; !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	delete(m.names, name)
	m.nsLog = append(m.nsLog, memNSOp{dir: path.Dir(name), name: name, remove: true})
	return nil
}

// Rename implements FS.
func (m *MemFS) Rename(oldName, newName string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	oldName, newName = path.Clean(oldName), path.Clean(newName)
	in, ok := m.names[oldName]
	if !ok {
		return &fs.PathError{Op: "rename", Path: oldName, Err: fs.ErrNotExist}
	}
	if path.Dir(oldName) != path.Dir(newName) {
		return fmt.Errorf("memfs: rename across directories %q -> %q", oldName, newName)
	}
	op := memNSOp{dir: path.Dir(newName), name: newName, oldName: oldName, inode: in}
	applyNSOp(m.names, op)
	m.nsLog = append(m.nsLog, op)
	return nil
}

// ReadDir implements FS.
func (m *MemFS) ReadDir(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir = path.Clean(dir)
	if !m.dirs[dir] {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: fs.ErrNotExist}
	}
	var out []string
	for name := range m.names {
		if path.Dir(name) == dir {
			out = append(out, path.Base(name))
		}
	}
	sort.Strings(out)
	return out, nil
}

// MkdirAll implements FS.
func (m *MemFS) MkdirAll(dir string, perm os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for d := path.Clean(dir); !m.dirs[d]; d = path.Dir(d) {
		m.dirs[d] = true
	}
	return nil
}

// SyncDir implements FS.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.syncErr != nil {
		return m.syncErr
	}
	dir = path.Clean(dir)
	rest := m.nsLog[:0]
	for _, op := range m.nsLog {
		if op.dir == dir {
			applyNSOp(m.durable, op)
		} else {
			rest = append(rest, op)
		}
	}
	m.nsLog = rest
	return nil
}

type memFile struct {
	fs       *MemFS
	inode    *memInode
	gen      uint64
	name     string
	pos      int64
	closed   bool
	writable bool
}

var _ File = (*memFile)(nil)

func (f *memFile) check(write bool) error {
	switch {
	case f.gen != f.fs.gen:
		return ErrCrashed
	case f.closed:
		return fs.ErrClosed
	case write && !f.writable:
		return &fs.PathError{Op: "write", Path: f.name, Err: fs.ErrPermission}
	}
	return nil
}

// opLocked applies op to the current image and queues it as unsynced.
func (f *memFile) opLocked(op memOp) {
	if !op.truncate {
		op.data = append([]byte(nil), op.data...)
	}
	in := f.inode
	in.data = applyOp(in.data, op)
	in.pending = append(in.pending, op)
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check(true); err != nil {
		return 0, err
	}
	f.opLocked(memOp{offset: f.pos, data: p})
	f.pos += int64(len(p))
	return len(p), nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check(true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, errors.New("memfs: negative offset")
	}
	f.opLocked(memOp{offset: off, data: p})
	return len(p), nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check(false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, errors.New("memfs: negative offset")
	}
	if off >= int64(len(f.inode.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.inode.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check(false); err != nil {
		return err
	}
	if f.fs.syncErr != nil {
		return f.fs.syncErr
	}
	in := f.inode
	for _, op := range in.pending {
		in.synced = applyOp(in.synced, op)
	}
	in.pending = nil
	return nil
}

func (f *memFile) Truncate(sizeBytes int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check(true); err != nil {
		return err
	}
	if sizeBytes < 0 {
		return errors.New("memfs: negative size")
	}
	f.opLocked(memOp{truncate: true, sizeBytes: sizeBytes})
	return nil
}

func (f *memFile) Preallocate(sizeBytes int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check(true); err != nil {
		return err
	}
	if sizeBytes > int64(len(f.inode.data)) {
		f.opLocked(memOp{truncate: true, sizeBytes: sizeBytes})
	}
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check(false); err != nil {
		return 0, err
	}
	return int64(len(f.inode.data)), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.gen == f.fs.gen && f.closed {
		return fs.ErrClosed
	}
	f.closed = true
	return nil
}
