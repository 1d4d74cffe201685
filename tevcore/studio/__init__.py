"""The app's page services: what a page asks for, checked once against the server's caps, and done in a queue turn.

A page collects input and renders; the work it asks for is done here, so no page can skip a cap or the compute
queue, and no page copies the math. `turns` (the `Seat` a request arrives with: the server's `Limits`, its compute
queue, the participant's key, and how the page hears back; every heavy service holds a queue turn through it),
`participants` (one key for all tabs of a browser: who a place in line and a space belong to), `page_states` (one typed state object per page and participant, so a page switch or a reload finds the
work), `reader` (the one
capped reader of every upload and file the app reads: the byte cap, and the text cap of a gzip's expanded size),
`models` (the targets, drafters and prompt sets a page loads; the app caches them), `explorer` (the tree
explorer's live generation, started and decoded in a queue turn, and a round re-scored for its rows), `traces`
(trace files opened for replay, saved, downloaded, described), `trails` (a sampled round's rrs or block trail,
the sibling diagnostics), `compact` (a round on a small vocabulary, for the rules to run on), `comparison`
(the verifier comparison's draws and sampled rounds),
`toy_rounds` (the toy target those rounds can be drawn at), `workshop` (the workshop's coupling rounds), `lessons`
(the workshop's lessons as data: a setting, a question, a truth the package computes, an explanation; the
settings' trees and rows in `lesson_settings`) and `lesson_service` (a lesson's truth computed once per setting through the compute queue, a participant's progress
as one typed object). A public function whose first parameter is a `Seat` is a heavy service and takes a queue
turn (a test enumerates them). This package sits above `room` (it applies the room's caps and queue); the engine
never imports it.
"""
