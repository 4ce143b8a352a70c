// Package slackbot connects gpubot to Slack over Socket Mode. It is the
// only importer of slack-go (with its subpackages blockkit, which renders
// Block Kit, and slackfake, a fake Slack for tests).
//
// # Basics
//
// An Adapter reads Socket Mode envelopes with slack-go's socketmode client
// and acks each one at once (Slack wants that within 3 s); the work then
// goes to the bot runtime (bot.Runtime.Submit), whose bounded worker pool
// runs commands.Service with panic recovery and deduplication. The Adapter
// is also the runtime's bot.Sender: every reply becomes one or more Web
// API calls in the outbound Queue.
//
//	/gpu …                  → commands.Input{Text}; a bare "/gpu request" opens the request modal (views.open)
//	button (block_actions)  → commands.Input{Action} via blockkit.ParseAction; a gpubot
//	                          button gpubot did not make → Input{Unreadable} (answered, audited)
//	modal (view_submission) → validated in the ack (response_action "errors"), then Input{Text}
//	app_home_opened         → views.publish of Service.Home; then, for a day, again every
//	                          minute in which anything was sent (WithHomeRefresh)
//
//	ToSender   → the sender only: response_url (ephemeral), else chat.postEphemeral, else a DM
//	ToChannel  → chat.postMessage: the request's card; its (channel, ts) is saved in the store
//	ToThread   → chat.postMessage with thread_ts = the card's ts
//	UpdateCard → chat.update of the card
//	ToPerson   → conversations.open + chat.postMessage (a DM)
//
// A reply too long for Block Kit is cut by blockkit, and the whole text is
// uploaded as a file next to it (files.getUploadURLExternal → upload →
// files.completeUploadExternal).
//
// # People
//
// People are known by the Slack user IDs in gpubot's configuration
// (people[].slackID); the service tells anyone else how to get added.
// Optionally (MatchByEmail, config slack.matchByEmail) a person with an
// email but no slackID is found through the Slack profile's e-mail
// address (users.info, users.lookupByEmail; scopes users:read and
// users:read.email), as a middleware around the command handler.
//
// # Deduplication
//
// Slack may deliver an envelope more than once (retries, several
// connections). Commands, modal submissions and App Home events are keyed
// by their envelope (or event) ID, button presses by (user, action,
// message ts, action_ts), and the runtime's Deduper (bbolt, with a TTL)
// drops repeats. A double click is two presses; the service answers the
// second without applying it again.
//
// # Rate limits
//
// All Web API calls go through one Queue: in order within a channel (and
// within one person's private replies), channels independently, about one
// message per second per channel after a small burst, and an HTTP 429
// holds the method back for its Retry-After before the call is retried.
// Nothing is dropped for a rate limit; network failures and 5xx answers
// are retried with backoff for up to 15 minutes.
//
// # Connection
//
// slack-go's socketmode client reconnects by itself after a network loss,
// a ping timeout or a "disconnect" (refresh_requested, warning). An
// envelope whose ack was lost is redelivered by Slack and dropped as a
// duplicate if it was already taken. Ready reports whether a connection
// is up (gpubot's /readyz). Run returns an error only for a refused token
// (ErrBotToken, ErrAppToken) or if auth.test fails at start.
//
// # Ordering
//
// One person's commands and clicks are handled one at a time, in the
// order Slack delivered them (bot.Event.Order is the user ID), so their
// answers come in the order typed. A thread update that overtakes its
// card (two workers) waits for the card.
//
// # Caveats
//
// Tokens are never logged nor shown: errors that could carry one are
// scrubbed. Request cards of a request whose card was never posted (work
// seeded into the simulated cluster) have no thread, so their thread
// updates are skipped. The bot must be a member of the channels it posts
// cards in (invite it), since the app asks only for chat:write.
package slackbot
