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

use futures::{Stream, StreamExt};
use tokio::sync::mpsc;

use crate::core::provider::{ProviderError, ProviderEvent, ProviderStream};

type Item = Result<ProviderEvent, ProviderError>;

/// Items decoded ahead of the turn, at most.
const AHEAD: usize = 1024;

/// Text handed over as one piece, at most (more goes in the next).
const PIECE_BYTES: usize = 64 * 1024;

/// `stream`, read ahead in a task of its own once first polled inside a
/// Tokio runtime (outside one, polled in place). Dropping the returned
/// stream drops `stream` too, at once, however long it has been waiting for
/// the provider: that is how a cancelled turn stops its provider.
pub fn ahead(stream: ProviderStream) -> ProviderStream {
    Ahead::Start(Some(stream)).boxed()
}

enum Ahead {
    /// Not polled yet.
    Start(Option<ProviderStream>),
    /// Read by its task; an item taken but not handed over yet, and
    /// whether the turn has already let the task run once for it.
    Running(mpsc::Receiver<Item>, Option<Item>, bool),
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
/// `held`, to be handed over next.
fn gather(first: Item, rx: &mut mpsc::Receiver<Item>, held: &mut Option<Item>) -> Item {
    let (mut text, thinking) = match first {
        Ok(ProviderEvent::Text(text)) => (text, false),
        Ok(ProviderEvent::Thinking(text)) => (text, true),
        other => return other,
    };
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
    }
    Ok(if thinking {
        ProviderEvent::Thinking(text)
    } else {
        ProviderEvent::Text(text)
    })
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
                            Ahead::Running(rx, None, false)
                        }
                        Err(_) => Ahead::InPlace(stream),
                    };
                }
                Ahead::Running(rx, held, yielded) => {
                    let first = match held.take() {
                        Some(item) => item,
                        None => match rx.poll_recv(cx) {
                            Poll::Ready(Some(item)) => item,
                            other => return other,
                        },
                    };
                    // Text with nothing behind it yet: the reading task gets
                    // one turn of the runtime first, so what has reached the
                    // socket meanwhile joins it. One turn, not a wait.
                    if !*yielded && rx.is_empty() && is_text(&first) {
                        *held = Some(first);
                        *yielded = true;
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                    *yielded = false;
                    return Poll::Ready(Some(gather(first, rx, held)));
                }
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
