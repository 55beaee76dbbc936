//! Text to term ids, as bm25s tokenizes (see the module above for the rules).
//!
//! The analyzer caches every distinct word it has seen: a word id for each, and the term (stem)
//! id each word maps to. New words are handed to the caller, who stems them and gives the stems
//! back ([`Analyzer::resolve`]); a word is stemmed once however often it occurs. While an index is
//! built the terms grow ([`Terms::Growing`]); against a finished index a stem that the corpus
//! never had maps to [`NO_TERM`] and the token is dropped, as bm25s drops unknown query tokens.
use std::collections::HashMap;
use std::sync::Arc;

use xxhash_rust::xxh3::Xxh3DefaultBuilder;

use crate::error::{Error, Result};

use super::index::Index;

/// The term id of a stem the index does not have.
pub const NO_TERM: u32 = u32::MAX;
/// The word id of a stopword (never a token).
const STOP: u32 = u32::MAX;
const CODE_POINTS: usize = 0x11_0000;

type Map = HashMap<Box<str>, u32, Xxh3DefaultBuilder>;

/// Which code points are word characters (`\w`): a bit per code point, taken from Python so that
/// the tokens are exactly those of Python's `re` (`str.isalnum()` or `_`).
#[derive(Clone)]
pub struct WordChars {
    bits: Vec<u64>,
}

impl WordChars {
    /// From a little-endian bitmap of 0x110000 bits (numpy's `packbits(..., bitorder="little")`).
    pub fn from_bitmap(bitmap: &[u8]) -> Result<Self> {
        if bitmap.len() != CODE_POINTS / 8 {
            return Err(Error::invalid(format!(
                "the word-character table must have {} bytes (one bit per code point), got {}",
                CODE_POINTS / 8,
                bitmap.len()
            )));
        }
        let bits = bitmap
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        Ok(WordChars { bits })
    }

    /// From a predicate (tests, and callers without Python).
    pub fn from_fn(is_word: impl Fn(char) -> bool) -> Self {
        let mut bits = vec![0u64; CODE_POINTS / 64];
        for c in (0..CODE_POINTS as u32).filter_map(char::from_u32) {
            if is_word(c) {
                bits[c as usize / 64] |= 1 << (c as usize % 64);
            }
        }
        WordChars { bits }
    }

    #[inline]
    pub fn is_word(&self, c: char) -> bool {
        let i = c as usize;
        self.bits[i / 64] >> (i % 64) & 1 == 1
    }

    /// Call `f` on each token of `text`: each maximal run of word characters at least two long.
    pub fn for_each_token(&self, text: &str, mut f: impl FnMut(&str)) {
        let mut start = usize::MAX;
        let mut run = 0usize;
        for (i, c) in text.char_indices() {
            if self.is_word(c) {
                if run == 0 {
                    start = i;
                }
                run += 1;
            } else {
                if run >= 2 {
                    f(&text[start..i]);
                }
                run = 0;
            }
        }
        if run >= 2 {
            f(&text[start..]);
        }
    }
}

/// Where the stems' term ids come from.
pub enum Terms {
    /// Building: a new stem gets the next id.
    Growing { ids: Map, names: Vec<Box<str>> },
    /// Searching: the index's terms; an unknown stem is [`NO_TERM`].
    Index(Arc<Index>),
}

/// Token ids of a batch of texts: text `i`'s are `ids[offsets[i]..offsets[i + 1]]`.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Tokens {
    pub ids: Vec<u32>,
    pub offsets: Vec<u64>,
}

pub struct Analyzer {
    chars: WordChars,
    /// Word -> word id (STOP for a stopword).
    words: Map,
    /// New words awaiting their stems, in the order they were first seen.
    pending: Vec<Box<str>>,
    /// Word id -> term id (NO_TERM: the index does not have the word's stem).
    word_term: Vec<u32>,
    terms: Terms,
}

impl Analyzer {
    /// An analyzer whose terms grow (building an index).
    pub fn new(chars: WordChars, stopwords: &[impl AsRef<str>]) -> Self {
        let terms = Terms::Growing {
            ids: Map::default(),
            names: Vec::new(),
        };
        Self::with_terms(chars, stopwords, terms)
    }

    /// An analyzer that maps stems to the terms of `index` (searching it).
    pub fn for_index(chars: WordChars, stopwords: &[impl AsRef<str>], index: Arc<Index>) -> Self {
        Self::with_terms(chars, stopwords, Terms::Index(index))
    }

    fn with_terms(chars: WordChars, stopwords: &[impl AsRef<str>], terms: Terms) -> Self {
        let mut words = Map::default();
        for w in stopwords {
            words.insert(w.as_ref().into(), STOP);
        }
        Analyzer {
            chars,
            words,
            pending: Vec::new(),
            word_term: Vec::new(),
            terms,
        }
    }

    /// Word ids of each text's tokens (stopwords dropped). Words never seen before get new ids and
    /// are returned in [`Analyzer::pending`] until [`Analyzer::resolve`] gives their stems.
    pub fn tokenize(&mut self, texts: &[impl AsRef<str>]) -> Tokens {
        let mut out = Tokens {
            ids: Vec::new(),
            offsets: Vec::with_capacity(texts.len() + 1),
        };
        out.offsets.push(0);
        for text in texts {
            let (chars, words, pending) = (&self.chars, &mut self.words, &mut self.pending);
            let known = self.word_term.len();
            chars.for_each_token(text.as_ref(), |tok| {
                let id = match words.get(tok) {
                    Some(&id) => id,
                    None => {
                        let id = (known + pending.len()) as u32;
                        words.insert(tok.into(), id);
                        pending.push(tok.into());
                        id
                    }
                };
                if id != STOP {
                    out.ids.push(id);
                }
            });
            out.offsets.push(out.ids.len() as u64);
        }
        out
    }

    /// Words seen by [`Analyzer::tokenize`] that await their stems.
    pub fn pending(&self) -> &[Box<str>] {
        &self.pending
    }

    /// The stems of the pending words, in their order: each word's term becomes known.
    pub fn resolve(&mut self, stems: &[impl AsRef<str>]) -> Result<()> {
        if stems.len() != self.pending.len() {
            return Err(Error::invalid(format!(
                "{} stems given for {} new words",
                stems.len(),
                self.pending.len()
            )));
        }
        for stem in stems {
            let id = match &mut self.terms {
                Terms::Growing { ids, names } => {
                    *ids.entry(stem.as_ref().into()).or_insert_with(|| {
                        names.push(stem.as_ref().into());
                        (names.len() - 1) as u32
                    })
                }
                Terms::Index(index) => index.term_id(stem.as_ref()).unwrap_or(NO_TERM),
            };
            self.word_term.push(id);
        }
        self.pending.clear();
        Ok(())
    }

    /// Term ids of tokenized texts (word ids from [`Analyzer::tokenize`], resolved), tokens
    /// whose stem the index lacks dropped.
    pub fn terms(&self, tokens: &Tokens) -> Result<Tokens> {
        let mut out = Tokens {
            ids: Vec::with_capacity(tokens.ids.len()),
            offsets: Vec::with_capacity(tokens.offsets.len()),
        };
        out.offsets.push(0);
        for w in tokens.offsets.windows(2) {
            let (a, b) = (w[0] as usize, w[1] as usize);
            let words = tokens.ids.get(a..b).ok_or_else(|| bad_offsets(tokens))?;
            for &wid in words {
                let term = *self.word_term.get(wid as usize).ok_or_else(|| {
                    Error::invalid(format!("word id {wid} has no stem yet (resolve first)"))
                })?;
                if term != NO_TERM {
                    out.ids.push(term);
                }
            }
            out.offsets.push(out.ids.len() as u64);
        }
        Ok(out)
    }

    /// The stems of the growing vocabulary, by term id (empty when searching an index).
    pub fn term_names(&self) -> &[Box<str>] {
        match &self.terms {
            Terms::Growing { names, .. } => names,
            Terms::Index(_) => &[],
        }
    }

    pub fn num_words(&self) -> usize {
        self.word_term.len() + self.pending.len()
    }
}

fn bad_offsets(tokens: &Tokens) -> Error {
    Error::invalid(format!(
        "token offsets do not fit the {} token ids (must start at 0 and not decrease)",
        tokens.ids.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn python_like() -> WordChars {
        WordChars::from_fn(|c| c.is_alphanumeric() || c == '_')
    }

    fn tokens(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        python_like().for_each_token(text, |t| out.push(t.to_string()));
        out
    }

    #[test]
    fn tokens_are_runs_of_two_or_more_word_characters() {
        assert_eq!(
            tokens("a bc, d_e 12 x9 ü é-ab"),
            ["bc", "d_e", "12", "x9", "ab"]
        );
        assert_eq!(tokens("zz"), ["zz"]);
        assert_eq!(tokens(""), Vec::<String>::new());
        assert_eq!(tokens("héllo wörld!"), ["héllo", "wörld"]);
    }

    #[test]
    fn stopwords_drop_and_words_are_stemmed_once() {
        let mut a = Analyzer::new(python_like(), &["the", "of"]);
        let t = a.tokenize(&["the cats of the cat", "cats run"]);
        assert_eq!(t.offsets, [0, 2, 4]);
        assert_eq!(
            a.pending(),
            ["cats".into(), "cat".into(), "run".into()] as [Box<str>; 3]
        );
        a.resolve(&["cat", "cat", "run"]).unwrap();
        let terms = a.terms(&t).unwrap();
        assert_eq!(terms.ids, [0, 0, 0, 1]);
        let again = a.tokenize(&["cat cats"]);
        assert!(a.pending().is_empty());
        assert_eq!(a.terms(&again).unwrap().ids, [0, 0]);
        assert_eq!(
            a.term_names(),
            ["cat".into(), "run".into()] as [Box<str>; 2]
        );
    }

    #[test]
    fn unresolved_words_are_refused() {
        let mut a = Analyzer::new(python_like(), &[] as &[&str]);
        let t = a.tokenize(&["new words"]);
        assert!(a.terms(&t).is_err());
        assert!(a.resolve(&["one"]).is_err());
    }

    #[test]
    fn bitmap_round_trip() {
        let chars = python_like();
        let bytes: Vec<u8> = chars.bits.iter().flat_map(|w| w.to_le_bytes()).collect();
        let back = WordChars::from_bitmap(&bytes).unwrap();
        for c in ['a', 'Z', '_', '0', ' ', '-', 'é', '中'] {
            assert_eq!(back.is_word(c), chars.is_word(c));
        }
        assert!(WordChars::from_bitmap(&bytes[1..]).is_err());
    }
}
