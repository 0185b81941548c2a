//go:build !linux

package netns

import "errors"

// Do is unavailable off Linux; Require has already skipped the test.
func (h *Host) Do(func() error) error {
	return errors.New("netns: network namespaces need Linux")
}
