//go:build !linux

package bus

import "sync/atomic"

// waker without a futex: one token on a channel for each move of the
// sleep word from 1 to 0 (only the mover sends, and the thread takes
// exactly one token per sleep).
type waker struct{ ch chan struct{} }

func (w *waker) init() { w.ch = make(chan struct{}, 1) }

func (w *waker) wait(*atomic.Uint32) { <-w.ch }

func (w *waker) wake(*atomic.Uint32) { w.ch <- struct{}{} }
