package auth_test

import (
	"errors"
	"fmt"

	"github.com/seqbus/seqbus/auth"
)

// Example shows one DATA frame's path: the primary signs the finished frame
// in place, the standby verifies it under the header's epoch and only then
// runs the replay check. The frame bytes stand in for what package wire
// encodes (header with FlagMAC set and CRC filled, then the payload).
func Example() {
	master, err := auth.GenerateMasterKey(nil) // production: auth.LoadKeyFile(path)
	if err != nil {
		panic(err)
	}
	const stream, epoch, firstSeq = 1, 7, 1001

	primary := auth.NewKeyring(&master, stream)
	_ = primary.Install(epoch) // at promotion, before the first Sign
	standby := auth.NewKeyring(&master, stream)
	_ = standby.Install(epoch) // or learnt with VerifyInstall
	var replay auth.EpochFilter

	frame := make([]byte, 40+32, 40+32+auth.TagLen) // header + payload, room for the tag
	frame, _ = primary.Sign(frame, frame, epoch)

	receive := func(datagram []byte) error {
		n := len(datagram) - auth.TagLen // wire: HeaderLen + Length
		if err := standby.Verify(datagram[:n], datagram[n:], epoch); err != nil {
			return err
		}
		return replay.Accept(epoch, firstSeq)
	}
	fmt.Println(receive(frame))
	fmt.Println(errors.Is(receive(frame), auth.ErrReplay))
	frame[45] ^= 1
	fmt.Println(receive(frame))
	// Output:
	// <nil>
	// true
	// auth: bad MAC
}
