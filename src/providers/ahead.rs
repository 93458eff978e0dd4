//! A provider's stream read ahead of the turn that consumes it: the stream
//! runs in a task of its own and hands its items over through a bounded
//! queue, so what has reached the process is decoded while the turn hands
//! on what came before, and the text that arrived meanwhile is handed over
//! together, as one piece: a provider faster than the turn makes fewer,
//! larger deltas instead of a backlog, one that trickles is unchanged, and
//! nothing waits for more to arrive. Read in the turn's own task, an HTTP
//! body shows no second frame waiting, ever: hyper's connection task hands
//! it over one frame at a time, each only once the next is asked for.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio::sync::mpsc;
use tokio::time::{Instant, Sleep};

use crate::core::provider::{ProviderError, ProviderEvent, ProviderStream};

type Item = Result<ProviderEvent, ProviderError>;

/// Items decoded ahead of the turn, at most.
const AHEAD: usize = 4096;

/// While the provider floods (the last piece took more than one item: text
/// was piling up), a piece goes on at most this often; the text that comes
/// meanwhile joins it. A chunk waits no longer than this for the ones behind
/// it, and a provider that trickles (each piece one item) never waits.
const FLOOD_EVERY: Duration = Duration::from_millis(2);

/// Text handed over as one piece, at most (more goes in the next).
const PIECE_BYTES: usize = 64 * 1024;

/// `stream`, read ahead in a task of its own once first polled inside a
/// Tokio runtime (outside one, polled in place). Dropping the returned
/// stream drops `stream` too, at once, however long it has been waiting for
/// the provider: that is how a cancelled turn stops its provider.
pub fn ahead(stream: ProviderStream) -> ProviderStream {
    Ahead::Start(Some(stream)).boxed()
}

/// The turn's side of a stream read by its task.
struct Reading {
    rx: mpsc::Receiver<Item>,
    /// An item taken but not handed over yet.
    held: Option<Item>,
    /// Whether the turn has already let the task run once for `held`.
    yielded: bool,
    /// While the provider floods: when the next piece may go on.
    flood: Option<Pin<Box<Sleep>>>,
}

enum Ahead {
    /// Not polled yet.
    Start(Option<ProviderStream>),
    /// Read by its task.
    Running(Reading),
    /// No runtime to run a task on.
    InPlace(ProviderStream),
}

fn is_text(item: &Item) -> bool {
    matches!(
        item,
        Ok(ProviderEvent::Text(_) | ProviderEvent::Thinking(_))
    )
}

/// `first` with the text of the same kind already waiting behind it
/// appended, up to [`PIECE_BYTES`]; the first other item taken is put in
/// `held`, to be handed over next. Also says how many items it took.
fn gather(first: Item, rx: &mut mpsc::Receiver<Item>, held: &mut Option<Item>) -> (Item, usize) {
    let (mut text, thinking) = match first {
        Ok(ProviderEvent::Text(text)) => (text, false),
        Ok(ProviderEvent::Thinking(text)) => (text, true),
        other => return (other, 1),
    };
    let mut taken = 1;
    while text.len() < PIECE_BYTES {
        match rx.try_recv() {
            Ok(Ok(ProviderEvent::Text(more))) if !thinking => text.push_str(&more),
            Ok(Ok(ProviderEvent::Thinking(more))) if thinking => text.push_str(&more),
            Ok(other) => {
                *held = Some(other);
                break;
            }
            Err(_) => break,
        }
        taken += 1;
    }
    let piece = if thinking {
        ProviderEvent::Thinking(text)
    } else {
        ProviderEvent::Text(text)
    };
    (Ok(piece), taken)
}

impl Reading {
    fn poll_piece(&mut self, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        let first = match self.held.take() {
            Some(item) => item,
            None => match std::task::ready!(self.rx.poll_recv(cx)) {
                Some(item) => item,
                None => return Poll::Ready(None),
            },
        };
        if is_text(&first) {
            // A flood: the piece waits for its time, gathering meanwhile.
            if let Some(flood) = self.flood.as_mut()
                && flood.as_mut().poll(cx).is_pending()
            {
                self.held = Some(first);
                return Poll::Pending;
            }
            // Text with nothing behind it yet: the reading task gets one
            // turn of the runtime first, so what has reached the socket
            // meanwhile joins it. One turn, not a wait.
            if self.flood.is_none() && !self.yielded && self.rx.is_empty() {
                self.held = Some(first);
                self.yielded = true;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
        }
        self.yielded = false;
        let (piece, taken) = gather(first, &mut self.rx, &mut self.held);
        let next = Instant::now() + FLOOD_EVERY;
        match (taken > 1, self.flood.as_mut()) {
            (false, _) => self.flood = None,
            (true, Some(flood)) => flood.as_mut().reset(next),
            (true, None) => self.flood = Some(Box::pin(tokio::time::sleep_until(next))),
        }
        Poll::Ready(Some(piece))
    }
}

impl Stream for Ahead {
    type Item = Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        loop {
            match &mut *self {
                Ahead::Start(stream) => {
                    let Some(stream) = stream.take() else {
                        return Poll::Ready(None);
                    };
                    *self = match tokio::runtime::Handle::try_current() {
                        Ok(runtime) => {
                            let (tx, rx) = mpsc::channel(AHEAD);
                            runtime.spawn(read(stream, tx));
                            Ahead::Running(Reading {
                                rx,
                                held: None,
                                yielded: false,
                                flood: None,
                            })
                        }
                        Err(_) => Ahead::InPlace(stream),
                    };
                }
                Ahead::Running(reading) => return reading.poll_piece(cx),
                Ahead::InPlace(stream) => return stream.poll_next_unpin(cx),
            }
        }
    }
}

/// Moves `stream`'s items into `tx` until it ends or nobody takes them.
async fn read(mut stream: ProviderStream, tx: mpsc::Sender<Item>) {
    loop {
        let item = tokio::select! {
            biased;
            () = tx.closed() => return,
            item = stream.next() => item,
        };
        let Some(item) = item else { return };
        if tx.send(item).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::provider::ModelStop;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    fn text(t: &str) -> Item {
        Ok(ProviderEvent::Text(t.to_owned()))
    }

    /// What the provider streams arrives whole and in order, text that
    /// waited together as one piece.
    #[tokio::test]
    async fn items_arrive_in_order_and_the_end_with_them() {
        let mut items: Vec<Item> = (0..3000).map(|i| text(&format!("{i} "))).collect();
        items.push(Ok(ProviderEvent::Done(ModelStop::EndTurn)));
        let mut stream = ahead(futures::stream::iter(items).boxed());
        let mut got = String::new();
        loop {
            match stream.next().await {
                Some(Ok(ProviderEvent::Text(t))) => got.push_str(&t),
                Some(Ok(ProviderEvent::Done(ModelStop::EndTurn))) => break,
                other => panic!("{other:?}"),
            }
        }
        let expected: String = (0..3000).map(|i| format!("{i} ")).collect();
        assert_eq!(got, expected);
        assert!(stream.next().await.is_none());
    }

    /// What arrived while the consumer was busy comes as one piece per kind,
    /// in order; what it finds nothing behind comes alone.
    #[tokio::test]
    async fn what_arrived_meanwhile_comes_as_one_piece() {
        let (tx, rx) = mpsc::unbounded_channel::<Item>();
        let mut stream = ahead(
            futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|i| (i, rx)) })
                .boxed(),
        );
        tx.send(text("first")).unwrap();
        assert!(matches!(
            stream.next().await,
            Some(Ok(ProviderEvent::Text(t))) if t == "first"
        ));
        for i in 0..100 {
            tx.send(text(&format!("{i},"))).unwrap();
        }
        tx.send(Ok(ProviderEvent::Thinking("hm".into()))).unwrap();
        tx.send(Ok(ProviderEvent::Thinking("m".into()))).unwrap();
        tx.send(text("after")).unwrap();
        tx.send(Ok(ProviderEvent::Done(ModelStop::EndTurn)))
            .unwrap();
        // The reader task runs on; give it a moment on this one thread.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let expected: String = (0..100).map(|i| format!("{i},")).collect();
        assert!(matches!(
            stream.next().await,
            Some(Ok(ProviderEvent::Text(t))) if t == expected
        ));
        assert!(matches!(
            stream.next().await,
            Some(Ok(ProviderEvent::Thinking(t))) if t == "hmm"
        ));
        assert!(matches!(
            stream.next().await,
            Some(Ok(ProviderEvent::Text(t))) if t == "after"
        ));
        assert!(matches!(
            stream.next().await,
            Some(Ok(ProviderEvent::Done(ModelStop::EndTurn)))
        ));
    }

    /// The provider's side of a test: items sent at the test's own pace.
    fn fed() -> (mpsc::UnboundedSender<Item>, ProviderStream) {
        let (tx, rx) = mpsc::unbounded_channel::<Item>();
        let stream =
            futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|i| (i, rx)) })
                .boxed();
        (tx, ahead(stream))
    }

    /// The chunks (`"<index>,"`) a piece holds.
    fn indices(text: &str) -> Vec<usize> {
        text.split_terminator(',')
            .map(|i| i.parse().unwrap())
            .collect()
    }

    /// A flood goes on in pieces at most every [`FLOOD_EVERY`]: after a
    /// piece of several chunks, the next waits for its time (a timer never
    /// fires early), gathering what comes meanwhile.
    #[tokio::test]
    async fn a_flood_goes_on_in_pieces_at_most_every_interval() {
        let (tx, mut stream) = fed();
        let feeder = tokio::spawn(async move {
            for burst in 0..20 {
                for i in 0..20 {
                    tx.send(text(&format!("{},", burst * 20 + i))).unwrap();
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            tx.send(Ok(ProviderEvent::Done(ModelStop::EndTurn)))
                .unwrap();
        });
        let mut pieces: Vec<(Instant, Vec<usize>)> = Vec::new();
        loop {
            match stream.next().await {
                Some(Ok(ProviderEvent::Text(t))) => pieces.push((Instant::now(), indices(&t))),
                Some(Ok(ProviderEvent::Done(_))) => break,
                other => panic!("{other:?}"),
            }
        }
        feeder.await.unwrap();
        let all: Vec<usize> = pieces.iter().flat_map(|(_, i)| i.clone()).collect();
        assert_eq!(all, (0..400).collect::<Vec<_>>());
        assert!(pieces.iter().any(|(_, chunks)| chunks.len() > 1));
        for pair in pieces.windows(2) {
            let ((before, chunks), (after, _)) = (&pair[0], &pair[1]);
            if chunks.len() > 1 {
                assert!(
                    *after - *before >= FLOOD_EVERY,
                    "a piece {:?} after one of {} chunks",
                    *after - *before,
                    chunks.len()
                );
            }
        }
    }

    /// A provider that trickles goes on chunk by chunk (the paced stream
    /// bench measures that none waits: `docs/benchmarks.md`, "Streaming").
    #[tokio::test]
    async fn a_trickle_goes_on_chunk_by_chunk() {
        let (tx, mut stream) = fed();
        for i in 0..20 {
            tx.send(text(&format!("{i},"))).unwrap();
            match stream.next().await {
                Some(Ok(ProviderEvent::Text(t))) => assert_eq!(indices(&t), [i]),
                other => panic!("{other:?}"),
            }
        }
    }

    /// A piece stops at 64 KiB; the rest follows in the next.
    #[tokio::test]
    async fn a_piece_is_bounded() {
        let chunk = "x".repeat(1024);
        let items: Vec<Item> = (0..200).map(|_| text(&chunk)).collect();
        let mut stream = ahead(futures::stream::iter(items).boxed());
        tokio::time::sleep(Duration::from_millis(20)).await;
        let mut total = 0;
        while let Some(item) = stream.next().await {
            match item {
                Ok(ProviderEvent::Text(t)) => {
                    assert!(t.len() <= PIECE_BYTES + 1024, "{}", t.len());
                    total += t.len();
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(total, 200 * 1024);
    }

    /// Dropping the stream drops the provider's stream while it waits for
    /// the provider.
    #[tokio::test]
    async fn dropping_it_drops_the_provider_stream() {
        struct Flag(Arc<AtomicBool>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = Flag(dropped.clone());
        let waiting_forever = futures::stream::once(async move {
            let _flag = flag;
            futures::future::pending::<()>().await;
            text("never")
        });
        let mut stream = ahead(waiting_forever.boxed());
        assert!(
            tokio::time::timeout(Duration::from_millis(10), stream.next())
                .await
                .is_err()
        );
        drop(stream);
        for _ in 0..100 {
            if dropped.load(Ordering::SeqCst) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("the provider's stream was not dropped");
    }

    /// Outside a runtime the stream is polled in place.
    #[test]
    fn without_a_runtime_it_is_read_in_place() {
        let items = vec![text("a"), text("b")];
        let got: Vec<Item> =
            futures::executor::block_on(ahead(futures::stream::iter(items).boxed()).collect());
        assert_eq!(got.len(), 2);
    }
}
