package auth

// This is the only file of the package that touches the file system; the
// rest is pure and can be driven by tests and the simulator without one.

import (
	"fmt"
	"io"
	"os"
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
		return fmt.Errorf("%w: creating %s: %w", ErrKeyFile, path, err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("%w: closing %s: %w", ErrKeyFile, path, cerr)
		}
		if err != nil {
			_ = os.Remove(path)
		}
	}()
	if _, err := f.Write(FormatKeyFile(k)); err != nil {
		return fmt.Errorf("%w: writing %s: %w", ErrKeyFile, path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("%w: syncing %s: %w", ErrKeyFile, path, err)
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
		return MasterKey{}, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	if err := checkKeyFileMode(path, before.Mode()); err != nil {
		return MasterKey{}, err
	}
	f, err := os.Open(path)
	if err != nil {
		return MasterKey{}, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	defer f.Close()
	// Check the file actually opened too: the path could have been swapped
	// (for a link, or another file) between the Lstat and the Open.
	after, err := f.Stat()
	if err != nil {
		return MasterKey{}, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	if !os.SameFile(before, after) {
		return MasterKey{}, fmt.Errorf("%w: %s changed while being opened", ErrKeyFile, path)
	}
	if err := checkKeyFileMode(path, after.Mode()); err != nil {
		return MasterKey{}, err
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(maxKeyFileLen)+1))
	if err != nil {
		return MasterKey{}, fmt.Errorf("%w: reading %s: %w", ErrKeyFile, path, err)
	}
	if len(data) > maxKeyFileLen {
		return MasterKey{}, fmt.Errorf("%w: %s is longer than a key file (%d bytes max)", ErrKeyFile, path, maxKeyFileLen)
	}
	k, err := ParseKeyFile(data)
	if err != nil {
		return MasterKey{}, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// checkKeyFileMode is the shape of every permission refusal, so both checks
// in LoadKeyFile word it the same way.
func checkKeyFileMode(path string, mode os.FileMode) error {
	if !mode.IsRegular() {
		return fmt.Errorf("%w: %w: %s is not a regular file (mode %v)", ErrKeyFile, ErrKeyPermissions, path, mode)
	}
	if perm := mode.Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%w: %w: %s has mode %#o, which group or others may access; run chmod 600 %s",
			ErrKeyFile, ErrKeyPermissions, path, perm, path)
	}
	return nil
}
