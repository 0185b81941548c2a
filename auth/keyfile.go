package auth

// This is the only file of the package that touches the file system; the
// rest is pure and can be driven by tests and the simulator without one.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// keyFileMode is the mode Keygen creates key files with: owner read and
// write, nothing for group and others.
const keyFileMode os.FileMode = 0o600

// Keygen creates a new master key file at path with 32 bytes from
// crypto/rand, mode 0600, and returns the key. It refuses to overwrite an
// existing file: replacing a cluster's key by accident would lock every
// node out of every other at the next restart.
func Keygen(path string) (MasterKey, error) {
	k, err := GenerateMasterKey(nil)
	if err != nil {
		return MasterKey{}, err
	}
	if err := WriteKeyFile(path, k); err != nil {
		return MasterKey{}, err
	}
	return k, nil
}

// WriteKeyFile writes k to a new file at path (mode 0600, created
// exclusively, synced before it returns). On any failure after creating it,
// it removes the partial file. Errors wrap ErrKeyFile.
func WriteKeyFile(path string, k MasterKey) (err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, keyFileMode)
	if err != nil {
		return keyFileErr(path, err, "cannot create it")
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = keyFileErr(path, cerr, "closing it")
		}
		if err != nil {
			_ = os.Remove(path)
		}
	}()
	if _, err := f.Write(FormatKeyFile(k)); err != nil {
		return keyFileErr(path, err, "writing it")
	}
	if err := f.Sync(); err != nil {
		return keyFileErr(path, err, "syncing it")
	}
	return nil
}

// LoadKeyFile reads and parses the master key file at path. It refuses,
// with an error matching ErrKeyPermissions (and ErrKeyFile) that names the
// path and the mode, a path that is not a regular file (a symbolic link, a
// directory, a device) and a file that group or others may access in any
// way (mode & 0o077 != 0). Every other failure wraps ErrKeyFile.
func LoadKeyFile(path string) (MasterKey, error) {
	// Lstat, so that a symbolic link is refused rather than followed.
	before, err := os.Lstat(path)
	if err != nil {
		return MasterKey{}, keyFileErr(path, err, "cannot read it")
	}
	if err := checkKeyFileMode(path, before.Mode()); err != nil {
		return MasterKey{}, err
	}
	f, err := os.Open(path)
	if err != nil {
		return MasterKey{}, keyFileErr(path, err, "cannot read it")
	}
	defer f.Close()
	// Check the file actually opened too: the path could have been swapped
	// (for a link, or another file) between the Lstat and the Open.
	after, err := f.Stat()
	if err != nil {
		return MasterKey{}, keyFileErr(path, err, "cannot read it")
	}
	if !os.SameFile(before, after) {
		return MasterKey{}, &keyFileError{msg: "auth: key file " + path + " changed while being opened"}
	}
	if err := checkKeyFileMode(path, after.Mode()); err != nil {
		return MasterKey{}, err
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(maxKeyFileLen)+1))
	if err != nil {
		return MasterKey{}, keyFileErr(path, err, "reading it")
	}
	if len(data) > maxKeyFileLen {
		return MasterKey{}, &keyFileError{msg: fmt.Sprintf("auth: key file %s is longer than a key file (%d bytes max)", path, maxKeyFileLen)}
	}
	k, err := ParseKeyFile(data)
	if err != nil {
		// ParseKeyFile's errors start with ErrKeyFile's text; say it once.
		detail := strings.TrimPrefix(err.Error(), ErrKeyFile.Error()+": ")
		return MasterKey{}, &keyFileError{msg: "auth: key file " + path + ": " + detail, cause: err}
	}
	return k, nil
}

// checkKeyFileMode is the shape of every permission refusal, so both checks
// in LoadKeyFile word it the same way.
func checkKeyFileMode(path string, mode os.FileMode) error {
	if !mode.IsRegular() {
		return &keyFileError{msg: fmt.Sprintf("auth: key file %s is not a regular file (mode %v)", path, mode), perm: true}
	}
	if perm := mode.Perm(); perm&0o077 != 0 {
		return &keyFileError{msg: fmt.Sprintf("auth: key file %s has mode %#o, which group or others may access; run chmod 600 %s",
			path, perm, path), perm: true}
	}
	return nil
}

// keyFileError is a key file failure worded once ("auth: key file PATH
// ..."; wrapping the sentinels with %w would print "auth: bad key file:
// auth: key file permissions ..."). It matches ErrKeyFile, ErrKeyPermissions
// when perm is set, and its cause.
type keyFileError struct {
	msg   string
	perm  bool
	cause error
}

func (e *keyFileError) Error() string { return e.msg }

func (e *keyFileError) Unwrap() []error {
	errs := []error{ErrKeyFile}
	if e.perm {
		errs = append(errs, ErrKeyPermissions)
	}
	if e.cause != nil {
		errs = append(errs, e.cause)
	}
	return errs
}

// keyFileErr words an I/O failure on the key file at path: what was being
// done, then the system's reason without repeating the path.
func keyFileErr(path string, cause error, doing string) error {
	reason := cause.Error()
	var pe *fs.PathError
	if errors.As(cause, &pe) {
		reason = pe.Err.Error()
	}
	return &keyFileError{msg: "auth: key file " + path + ": " + doing + ": " + reason, cause: cause}
}
