package mail_test

import (
	"fmt"

	"github.com/helpdesk-dev/helpdesk/mail"
)

func ExampleReferences() {
	// The ticket's earlier messages, oldest first: the root, the customer's
	// mails and our replies. The reply being sent is never among them.
	earlier := []string{
		"<T-500001.root@helpdesk.example.com>",
		"<CAJx8k@mail.gmail.com>",
		"<reply1@helpdesk.example.com>",
	}
	fmt.Println(mail.References(earlier))
	// Output: [<T-500001.root@helpdesk.example.com> <CAJx8k@mail.gmail.com> <reply1@helpdesk.example.com>]
}

func ExampleReplySubject() {
	fmt.Println(mail.ReplySubject("Late parcel", "T-500001"))
	fmt.Println(mail.ReplySubject("RE: Re: Late parcel [#T-500001]", "T-500001"))
	// Output:
	// Re: Late parcel [#T-500001]
	// Re: Late parcel [#T-500001]
}
