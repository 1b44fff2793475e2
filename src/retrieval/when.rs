//! When a memory was learned, in words a model cannot misread, and the periods a query names.
//!
//! Every revision carries the time it was learned (`memory_learned_times`, migration
//! `20261206100000`: the `sent_at` of the authenticated message it was told in, else the time it
//! was written). This module turns that instant into what the memory line says and ranking uses:
//! - [`told_on`]: an absolute date with the month in words, `8 May 2023` (UTC). Absolute, because
//!   a line is read later than it was written: "2 days ago" is wrong the next day, and a prompt
//!   snapshot or a recall result is kept and reread. Month in words, because `05/08/2023` means
//!   two different days on two sides of the Atlantic.
//! - [`relative_phrases`]: the relative words of a body (`yesterday`, `last week`, `two years
//!   ago`) resolved against that date, so "I went yesterday" told on 8 May 2023 says 7 May 2023.
//!   Where English leaves a choice open ("last Friday" said on a Saturday), the resolution says
//!   what is known (`the Friday before 15 July 2023`), never a guessed day.
//! - [`QueryPeriod::find`]: the periods a query names (`in May 2023`, `last week`, `yesterday`,
//!   `two years ago`), resolved against the time the question was asked, which ranking boosts
//!   memories learned in.
//!
//! Plain English words only, matched as whole words: no rule knows any data set's names or
//! wording.

use chrono::{DateTime, Datelike, Days, Duration, Months, NaiveDate, TimeZone, Utc, Weekday};

/// The English month names, January first: how lines write a month, and how dates written for
/// people (LoCoMo's session times, queries) are read.
pub const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

const WEEKDAYS: [(&str, Weekday); 7] = [
    ("Monday", Weekday::Mon),
    ("Tuesday", Weekday::Tue),
    ("Wednesday", Weekday::Wed),
    ("Thursday", Weekday::Thu),
    ("Friday", Weekday::Fri),
    ("Saturday", Weekday::Sat),
    ("Sunday", Weekday::Sun),
];

/// The most relative phrases one memory line resolves (each costs the allowance).
pub const MAX_RESOLVED_PHRASES: usize = 3;

/// The day `at` falls on (UTC) as the memory line writes it: `8 May 2023`.
pub fn told_on(at: DateTime<Utc>) -> String {
    day_words(at.date_naive())
}

fn day_words(day: NaiveDate) -> String {
    format!("{} {} {}", day.day(), MONTHS[day.month0() as usize], day.year())
}

fn month_words(day: NaiveDate) -> String {
    format!("{} {}", MONTHS[day.month0() as usize], day.year())
}

/// One word of a text, lower-cased, with where it stands in the original.
#[derive(Clone, Debug)]
struct Word<'a> {
    lower: String,
    original: &'a str,
    start: usize,
    end: usize,
}

/// The words of `text`: maximal runs of letters (an apostrophe inside kept) or of digits.
fn words(text: &str) -> Vec<Word<'_>> {
    let mut out = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        let digit = c.is_ascii_digit();
        if !digit && !c.is_alphabetic() {
            continue;
        }
        let mut end = start + c.len_utf8();
        while let Some(&(i, n)) = chars.peek() {
            let same = if digit { n.is_ascii_digit() } else { n.is_alphabetic() };
            if !same {
                break;
            }
            end = i + n.len_utf8();
            chars.next();
        }
        let original = &text[start..end];
        out.push(Word { lower: original.to_lowercase(), original, start, end });
    }
    out
}

/// A small count written as digits or as an English word ("a", "one" ... "twelve").
fn count(word: &str) -> Option<u32> {
    if let Ok(n) = word.parse::<u32>() {
        return (1..=100).contains(&n).then_some(n);
    }
    let n = match word {
        "a" | "an" | "one" => 1,
        "two" => 2,
        "three" => 3,
        "four" => 4,
        "five" => 5,
        "six" => 6,
        "seven" => 7,
        "eight" => 8,
        "nine" => 9,
        "ten" => 10,
        "eleven" => 11,
        "twelve" => 12,
        _ => return None,
    };
    Some(n)
}

fn weekday(word: &str) -> Option<(&'static str, Weekday)> {
    WEEKDAYS.iter().copied().find(|(name, _)| {
        let name = name.to_ascii_lowercase();
        word == name || ((3..=5).contains(&word.len()) && name.starts_with(word))
    })
}

/// The time unit a word names (`day`, `weeks`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    Day,
    Week,
    Month,
    Year,
}

fn unit(word: &str) -> Option<Unit> {
    Some(match word {
        "day" | "days" => Unit::Day,
        "week" | "weeks" => Unit::Week,
        "month" | "months" => Unit::Month,
        "year" | "years" => Unit::Year,
        _ => return None,
    })
}

/// A relative phrase of a memory body and what it means, given the day the memory was told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedPhrase {
    /// The words as the body has them (`last Fri`, `two years ago`).
    pub phrase: String,
    /// What they mean (`the Friday before 15 July 2023`, `2021`).
    pub meaning: String,
}

/// The relative time phrases of `body`, resolved against `told` (the learned time), in order of
/// appearance, each phrase once, at most [`MAX_RESOLVED_PHRASES`].
pub fn relative_phrases(body: &str, told: DateTime<Utc>) -> Vec<ResolvedPhrase> {
    let day = told.date_naive();
    let said = day_words(day);
    let ws = words(body);
    let mut out: Vec<ResolvedPhrase> = Vec::new();
    let mut push = |from: usize, to: usize, meaning: String| {
        let phrase = body[ws[from].start..ws[to].end].to_owned();
        if out.len() < MAX_RESOLVED_PHRASES && !out.iter().any(|p| p.phrase.eq_ignore_ascii_case(&phrase)) {
            out.push(ResolvedPhrase { phrase, meaning });
        }
    };
    let shifted_month = |months: i32| {
        let first = day.with_day(1).expect("day 1 exists");
        let moved = match months.signum() {
            -1 => first.checked_sub_months(Months::new(months.unsigned_abs())),
            _ => first.checked_add_months(Months::new(months.unsigned_abs())),
        };
        moved.map(month_words)
    };
    let mut i = 0;
    while i < ws.len() {
        let w = ws[i].lower.as_str();
        let next = ws.get(i + 1).map(|n| n.lower.as_str()).unwrap_or("");
        match w {
            "yesterday" => push(i, i, day_words(day - Days::new(1))),
            "tomorrow" => push(i, i, day_words(day + Days::new(1))),
            "last" if next == "night" => {
                push(i, i + 1, day_words(day - Days::new(1)));
                i += 1;
            }
            "ago" if i >= 2 => {
                if let (Some(n), Some(u)) = (count(&ws[i - 2].lower), unit(&ws[i - 1].lower)) {
                    let meaning = match u {
                        Unit::Day => day.checked_sub_days(Days::new(u64::from(n))).map(day_words),
                        Unit::Week => Some(format!("{} {} before {said}", ws[i - 2].original, ws[i - 1].original)),
                        Unit::Month => shifted_month(-(n as i32)),
                        Unit::Year => Some((day.year() - n as i32).to_string()),
                    };
                    if let Some(meaning) = meaning {
                        push(i - 2, i, meaning);
                    }
                }
            }
            "last" | "next" | "this" if !next.is_empty() => {
                let (direction, sign) = match w {
                    "last" => ("before", -1),
                    "next" => ("after", 1),
                    _ => ("of", 0),
                };
                let meaning = match next {
                    "week" | "weekend" => Some(format!("the {next} {direction} {said}")),
                    "month" => shifted_month(sign),
                    "year" => Some((day.year() + sign).to_string()),
                    other => match weekday(other) {
                        Some((name, _)) if sign != 0 => Some(format!("the {name} {direction} {said}")),
                        _ => None,
                    },
                };
                if let Some(meaning) = meaning {
                    push(i, i + 1, meaning);
                    i += 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// What a memory line adds after its date: `("yesterday": 7 May 2023; "last week": the week
/// before 8 May 2023)`, or nothing when the body has no relative phrase.
pub fn resolved_phrases_note(body: &str, told: DateTime<Utc>) -> String {
    let phrases = relative_phrases(body, told);
    if phrases.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = phrases.iter().map(|p| format!("\"{}\": {}", p.phrase, p.meaning)).collect();
    format!(" ({})", inner.join("; "))
}

/// A period of time a query names, resolved against when the question was asked: memories
/// learned in `[start, end)` get the period component of their score.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueryPeriod {
    /// First instant of the period (UTC).
    pub start: DateTime<Utc>,
    /// First instant after it.
    pub end: DateTime<Utc>,
    /// The period in words (`May 2023`, `7 May 2023`, `the week of 1 May 2023`), for the
    /// component's reason. Never the query's own words.
    pub label: String,
}

impl QueryPeriod {
    /// Whether `at` falls in the period.
    pub fn contains(&self, at: DateTime<Utc>) -> bool {
        self.start <= at && at < self.end
    }

    fn days(first: NaiveDate, last_exclusive: NaiveDate, label: String) -> Self {
        let midnight = |d: NaiveDate| Utc.from_utc_datetime(&d.and_hms_opt(0, 0, 0).expect("midnight exists"));
        QueryPeriod { start: midnight(first), end: midnight(last_exclusive), label }
    }

    fn day(day: NaiveDate) -> Self {
        Self::days(day, day + Days::new(1), day_words(day))
    }

    fn month(year: i32, month: u32) -> Option<Self> {
        let first = NaiveDate::from_ymd_opt(year, month, 1)?;
        Some(Self::days(first, first.checked_add_months(Months::new(1))?, month_words(first)))
    }

    fn year(year: i32) -> Option<Self> {
        let first = NaiveDate::from_ymd_opt(year, 1, 1)?;
        Some(Self::days(first, NaiveDate::from_ymd_opt(year + 1, 1, 1)?, year.to_string()))
    }

    fn week_of(day: NaiveDate) -> Self {
        let monday = day - Days::new(u64::from(day.weekday().num_days_from_monday()));
        Self::days(monday, monday + Days::new(7), format!("the week of {}", day_words(monday)))
    }

    /// The periods `query` names, resolved against `asked` (the asking message's time): absolute
    /// dates (`8 May 2023`, `May 8, 2023`), months (`May 2023`, `in June`: the latest June that
    /// has begun), years (`in 2022`), and relative ones (`yesterday`, `today`, `last week`,
    /// `this month`, `last year`, `last Friday`, `two years ago`). Bare `may` and `march` count
    /// as months only beside a day or a year; other bare month names only after `in`/`during`.
    pub fn find(query: &str, asked: DateTime<Utc>) -> Vec<QueryPeriod> {
        let today = asked.date_naive();
        let ws = words(query);
        let lower: Vec<&str> = ws.iter().map(|w| w.lower.as_str()).collect();
        let at = |i: usize| lower.get(i).copied().unwrap_or("");
        let year_at = |i: usize| at(i).parse::<i32>().ok().filter(|y| (1900..=2200).contains(y) && at(i).len() == 4);
        let day_at = |i: usize| at(i).parse::<u32>().ok().filter(|d| (1..=31).contains(d) && at(i).len() <= 2);
        let mut out: Vec<QueryPeriod> = Vec::new();
        let mut i = 0;
        while i < lower.len() {
            let w = at(i);
            let found: Option<(QueryPeriod, usize)> = if let Some(m) = month_named(w) {
                // day month [year] | month day[,] [year] | month year | (in|during) month
                // `span`: the words after the month that belong to it (skipped afterwards).
                let day_before = || i.checked_sub(1).and_then(day_at);
                let (day, year, span) = match (day_at(i + 1), year_at(i + 1), year_at(i + 2)) {
                    (Some(d), _, Some(y)) => (Some(d), Some(y), 2),
                    (Some(d), _, None) => (Some(d), None, 1),
                    (None, Some(y), _) => (day_before(), Some(y), 1),
                    _ => (day_before(), None, 0),
                };
                let bare = day.is_none() && year.is_none();
                let ambiguous = matches!(w, "may" | "march");
                let introduced = i > 0 && matches!(at(i - 1), "in" | "during" | "of" | "since");
                if bare && (ambiguous || !introduced) {
                    None
                } else {
                    let year = year.unwrap_or_else(|| latest_year_of(today, m, day));
                    let period = match day {
                        Some(d) => NaiveDate::from_ymd_opt(year, m, d).map(QueryPeriod::day),
                        None => QueryPeriod::month(year, m),
                    };
                    period.map(|p| (p, span))
                }
            } else if let Some(y) = year_at(i) {
                QueryPeriod::year(y).map(|p| (p, 0))
            } else {
                relative_period(&lower, i, today)
            };
            if let Some((period, span)) = found {
                if !out.contains(&period) {
                    out.push(period);
                }
                i += span;
            }
            i += 1;
        }
        out
    }
}

/// A month named by its full English name or a common abbreviation (`Sept`, `Oct`; not `mar`,
/// a word of its own).
fn month_named(word: &str) -> Option<u32> {
    MONTHS
        .iter()
        .position(|name| {
            let name = name.to_ascii_lowercase();
            word == name || ((3..=4).contains(&word.len()) && word != "mar" && name.starts_with(word))
        })
        .map(|i| i as u32 + 1)
}

/// The latest year in which `month` (and `day`) has begun by `today`.
fn latest_year_of(today: NaiveDate, month: u32, day: Option<u32>) -> i32 {
    let begun = |year: i32| NaiveDate::from_ymd_opt(year, month, day.unwrap_or(1)).is_some_and(|d| d <= today);
    if begun(today.year()) {
        today.year()
    } else {
        today.year() - 1
    }
}

/// A relative period starting at word `i` (`yesterday`, `last week`, `two years ago`, ...) and
/// how many more words it spans.
fn relative_period(lower: &[&str], i: usize, today: NaiveDate) -> Option<(QueryPeriod, usize)> {
    let at = |k: usize| lower.get(k).copied().unwrap_or("");
    let week_start = |d: NaiveDate| d - Days::new(u64::from(d.weekday().num_days_from_monday()));
    match at(i) {
        "yesterday" => Some((QueryPeriod::day(today - Days::new(1)), 0)),
        "today" => Some((QueryPeriod::day(today), 0)),
        "last" | "this" | "past" => {
            let previous = at(i) != "this";
            let period = match at(i + 1) {
                "week" => Some(QueryPeriod::week_of(if previous { week_start(today) - Days::new(7) } else { today })),
                "weekend" => {
                    let saturday = week_start(today) + Days::new(5);
                    let saturday = if previous || saturday > today { saturday - Days::new(7) } else { saturday };
                    Some(QueryPeriod::days(
                        saturday,
                        saturday + Days::new(2),
                        format!("the weekend of {}", day_words(saturday)),
                    ))
                }
                "month" => {
                    let first = today.with_day(1)?;
                    let first = if previous { first.checked_sub_months(Months::new(1))? } else { first };
                    QueryPeriod::month(first.year(), first.month())
                }
                "year" => QueryPeriod::year(today.year() - i32::from(previous)),
                "night" if previous => Some(QueryPeriod::day(today - Days::new(1))),
                other => match weekday(other) {
                    Some((_, wd)) if previous => {
                        let back = (today.weekday().num_days_from_monday() + 7 - wd.num_days_from_monday()) % 7;
                        let back = if back == 0 { 7 } else { back };
                        Some(QueryPeriod::day(today - Days::new(u64::from(back))))
                    }
                    _ => None,
                },
            };
            period.map(|p| (p, 1))
        }
        n => {
            let (n, u) = (count(n)?, unit(at(i + 1))?);
            if at(i + 2) != "ago" {
                return None;
            }
            let period = match u {
                Unit::Day => QueryPeriod::day(today.checked_sub_days(Days::new(u64::from(n)))?),
                Unit::Week => QueryPeriod::week_of(today - Duration::weeks(i64::from(n))),
                Unit::Month => {
                    let d = today.with_day(1)?.checked_sub_months(Months::new(n))?;
                    QueryPeriod::month(d.year(), d.month())?
                }
                Unit::Year => QueryPeriod::year(today.year() - n as i32)?,
            };
            Some((period, 2))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(y: i32, m: u32, d: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, m, d, 13, 56, 0).unwrap()
    }

    #[test]
    fn the_date_is_absolute_with_the_month_in_words() {
        assert_eq!(told_on(at(2023, 5, 8)), "8 May 2023");
        assert_eq!(told_on(at(2022, 12, 31)), "31 December 2022");
    }

    #[test]
    fn relative_words_of_a_body_resolve_against_the_day_it_was_told() {
        let told = at(2023, 5, 8);
        let r =
            |body: &str| relative_phrases(body, told).into_iter().map(|p| (p.phrase, p.meaning)).collect::<Vec<_>>();
        assert_eq!(r("I went to the support group yesterday."), vec![("yesterday".into(), "7 May 2023".into())]);
        assert_eq!(r("Last night was fun"), vec![("Last night".into(), "7 May 2023".into())]);
        assert_eq!(r("We met two days ago"), vec![("two days ago".into(), "6 May 2023".into())]);
        assert_eq!(
            r("ran a race last Saturday"),
            vec![("last Saturday".into(), "the Saturday before 8 May 2023".into())]
        );
        assert_eq!(r("Last Fri I took the kids"), vec![("Last Fri".into(), "the Friday before 8 May 2023".into())]);
        assert_eq!(r("I moved 4 years ago"), vec![("4 years ago".into(), "2019".into())]);
        assert_eq!(r("a talent show next month"), vec![("next month".into(), "June 2023".into())]);
        assert_eq!(
            r("went last week, and last year too"),
            vec![("last week".into(), "the week before 8 May 2023".into()), ("last year".into(), "2022".into())]
        );
        assert_eq!(r("a month ago"), vec![("a month ago".into(), "April 2023".into())]);
        assert!(r("I like the last one, this is great").is_empty());
        assert!(r("Nothing relative here.").is_empty());
    }

    #[test]
    fn the_note_is_empty_without_relative_words_and_bounded_with_many() {
        let told = at(2023, 1, 1);
        assert_eq!(resolved_phrases_note("tabs over spaces", told), "");
        assert_eq!(resolved_phrases_note("yesterday", told), " (\"yesterday\": 31 December 2022)");
        let many = "yesterday, last week, last month, last year, tomorrow";
        assert_eq!(relative_phrases(many, told).len(), MAX_RESOLVED_PHRASES);
    }

    #[test]
    fn a_query_names_absolute_periods() {
        let asked = at(2023, 10, 20);
        let labels = |q: &str| QueryPeriod::find(q, asked).into_iter().map(|p| p.label).collect::<Vec<_>>();
        assert_eq!(labels("What did Maria do in May 2023?"), vec!["May 2023"]);
        assert_eq!(labels("What happened on 8 May, 2023?"), vec!["8 May 2023"]);
        assert_eq!(labels("What happened on May 23, 2023?"), vec!["23 May 2023"]);
        assert_eq!(labels("Where did she go in 2022?"), vec!["2022"]);
        assert_eq!(labels("camping in June?"), vec!["June 2023"]);
        assert_eq!(labels("plans in November"), vec!["November 2022"], "the latest November that has begun");
        assert!(labels("May I ask what you think?").is_empty(), "a bare 'may' is a verb");
        assert!(labels("June said hello").is_empty(), "a bare month name may be a person");
    }

    #[test]
    fn a_query_names_relative_periods_resolved_against_the_asking_time() {
        let asked = at(2023, 5, 10); // a Wednesday
        let periods = |q: &str| QueryPeriod::find(q, asked);
        let one = |q: &str| periods(q).into_iter().next().unwrap();
        assert_eq!(one("what did I say yesterday").label, "9 May 2023");
        assert_eq!(one("last week").label, "the week of 1 May 2023");
        assert_eq!(one("last month").label, "April 2023");
        assert_eq!(one("two years ago").label, "2021");
        assert_eq!(one("3 days ago").label, "7 May 2023");
        assert_eq!(one("last Friday").label, "5 May 2023");
        assert_eq!(one("last weekend").label, "the weekend of 6 May 2023");
        let week = one("last week");
        assert!(week.contains(at(2023, 5, 7)) && !week.contains(at(2023, 5, 8)) && !week.contains(at(2023, 4, 30)));
        assert!(periods("tabs or spaces?").is_empty());
    }
}
