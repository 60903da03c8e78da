//! A drawing of a history: a line per thread, each operation an interval with its result.
//!
//! ```text
//! t0 [#0 Push(1): Pushed]     [#2 Pop: Popped(2)]
//! t1    [#1 Push(2): Pushed-]    [#3 Pop: Empty]
//! ```
//!
//! Columns follow the order of the stamps, not their values: an operation that returned
//! before another was called ends in a column left of where the other begins, and two
//! operations that overlap in time overlap on the page.

use std::fmt::{self, Debug, Write as _};

use crate::history::History;

/// A drawing of a [`History`]; see [`History::timeline`]. Its `Display` is the drawing.
///
/// # Examples
///
/// ```
/// use pitlane_lincheck::History;
/// use pitlane_lincheck::specs::{ContainerOp::*, ContainerRet::*};
///
/// let mut history = History::new();
/// history.add(0, 0..2, Push(1), Pushed)?;
/// history.add(1, 1..3, Pop, Popped(1))?;
/// let drawing = history.timeline().to_string();
/// assert_eq!(
///     drawing,
///     "t0 [#0 Push(1): Pushed]\n\
///      t1  [#1 Pop: Popped(1)-]\n"
/// );
/// # Ok::<(), pitlane_lincheck::HistoryError>(())
/// ```
pub struct Timeline<'h, Op, Ret> {
    history: &'h History<Op, Ret>,
}

impl<'h, Op, Ret> Timeline<'h, Op, Ret> {
    pub(crate) fn new(history: &'h History<Op, Ret>) -> Self {
        Timeline { history }
    }
}

impl<Op: Debug, Ret: Debug> fmt::Display for Timeline<'_, Op, Ret> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ops = self.history.operations();
        if ops.is_empty() {
            return writeln!(f, "(no operations)");
        }
        let labels: Vec<String> = ops
            .iter()
            .enumerate()
            .map(|(id, o)| {
                let mut label = String::new();
                let _ = write!(label, "#{id} {:?}: {:?}", o.op, o.result);
                label
            })
            .collect();

        // Events in time order, calls before returns at equal stamps (as the checker reads
        // them); each gets a column strictly right of the previous event's, and a return
        // sits far enough right of its call for the label to fit between.
        let mut events: Vec<usize> = (0..2 * ops.len()).collect();
        events.sort_by_key(|&e| {
            let o = &ops[e / 2];
            if e % 2 == 0 { (o.call, 0) } else { (o.ret, 1) }
        });
        let mut call_col = vec![0usize; ops.len()];
        let mut ret_col = vec![0usize; ops.len()];
        let mut cursor = 0usize;
        for e in events {
            let id = e / 2;
            if e % 2 == 0 {
                call_col[id] = cursor;
                cursor += 1;
            } else {
                let fit = call_col[id] + labels[id].chars().count() + 1;
                ret_col[id] = cursor.max(fit);
                cursor = ret_col[id] + 1;
            }
        }

        // A line for each thread that ran something, in order: thread numbers are the
        // caller's, and may be sparse or huge.
        let mut threads: Vec<usize> = ops.iter().map(|o| o.thread).collect();
        threads.sort_unstable();
        threads.dedup();
        let name_width = format!("t{}", threads.last().copied().unwrap_or(0)).len();
        for thread in threads {
            let mut line: Vec<char> = Vec::new();
            for (id, _) in ops.iter().enumerate().filter(|(_, o)| o.thread == thread) {
                if line.len() <= ret_col[id] {
                    line.resize(ret_col[id] + 1, ' ');
                }
                line[call_col[id]] = '[';
                let mut col = call_col[id] + 1;
                for c in labels[id].chars() {
                    line[col] = c;
                    col += 1;
                }
                for cell in &mut line[col..ret_col[id]] {
                    *cell = '-';
                }
                line[ret_col[id]] = ']';
            }
            let line: String = line.into_iter().collect();
            writeln!(
                f,
                "{:<name_width$} {}",
                format!("t{thread}"),
                line.trim_end()
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::History;
    use crate::specs::{ContainerOp::*, ContainerRet::*};

    #[test]
    fn real_time_order_shows_as_columns() {
        let mut h = History::new();
        h.add(0, 0..1, Push(1), Pushed).unwrap();
        h.add(1, 2..5, Pop, Popped(1)).unwrap();
        h.add(0, 3..4, Pop, Empty).unwrap();
        let drawing = h.timeline().to_string();
        let lines: Vec<&str> = drawing.lines().collect();
        assert_eq!(lines.len(), 2);
        let end_of_push = lines[0].find(']').unwrap();
        let start_of_pop = lines[1].find('[').unwrap();
        assert!(end_of_push < start_of_pop, "{drawing}");
        // The empty pop lies inside the other thread's pop.
        let second_start = lines[0].rfind('[').unwrap();
        let second_end = lines[0].rfind(']').unwrap();
        let pop_end = lines[1].rfind(']').unwrap();
        assert!(
            start_of_pop < second_start && second_end < pop_end,
            "{drawing}"
        );
    }

    #[test]
    fn an_empty_history_says_so() {
        let h: History<u8, u8> = History::new();
        assert_eq!(h.timeline().to_string(), "(no operations)\n");
    }
}
