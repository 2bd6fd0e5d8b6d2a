//! Document assembly: clean lines into sections, paragraphs, sentences and links.

use distillery_core::{Link, Paragraph, Section, Sentence};

use super::Parsed;
use super::inline::{Out, inline, strip_list_markers};
use super::tables::heading;

enum Block {
    Heading { level: u32, out: Out },
    Para(Out),
}

pub(super) fn build_document(mid: &str, title: &str, parsed: &mut Parsed) {
    let mut blocks: Vec<Block> = Vec::new();
    let mut para: Option<Out> = None;
    let flush = |para: &mut Option<Out>, blocks: &mut Vec<Block>| {
        if let Some(p) = para.take() {
            blocks.push(Block::Para(p));
        }
    };
    for line in mid.split('\n') {
        if let Some((level, raw)) = heading(line) {
            flush(&mut para, &mut blocks);
            let mut o = Out::default();
            inline(raw.trim(), &mut o, title, 0);
            o.trim_end();
            if !o.chars.is_empty() {
                blocks.push(Block::Heading { level, out: o });
            }
            continue;
        }
        let t = line.trim();
        if t.is_empty() || t.starts_with("----") {
            flush(&mut para, &mut blocks);
            continue;
        }
        let mut o = Out::default();
        inline(strip_list_markers(t), &mut o, title, 0);
        o.trim_end();
        if o.chars.is_empty() {
            flush(&mut para, &mut blocks);
            continue;
        }
        match para.as_mut() {
            Some(p) => {
                p.chars.push('\n');
                p.append(o);
            }
            None => para = Some(o),
        }
    }
    flush(&mut para, &mut blocks);

    let mut text: Vec<char> = Vec::new();
    let mut links: Vec<Link> = Vec::new();
    // Open sections: (index, level); the lead is closed by any heading.
    let mut open: Vec<(usize, u32)> = Vec::new();
    let mut current: i32 = -1;
    let mut last_end = 0u32;
    let mut paragraphs: Vec<(u32, u32, i32)> = Vec::new();
    for block in blocks {
        if !text.is_empty() {
            text.extend(['\n', '\n']);
        }
        let start = text.len() as u32;
        let out = match block {
            Block::Heading { level, out } => {
                while let Some(&(idx, l)) = open.last() {
                    if l == 0 || l >= level {
                        parsed.sections[idx].end = last_end;
                        open.pop();
                    } else {
                        break;
                    }
                }
                parsed.sections.push(Section {
                    title: out.text(),
                    level,
                    start,
                    end: start,
                });
                open.push((parsed.sections.len() - 1, level));
                current = parsed.sections.len() as i32 - 1;
                out
            }
            Block::Para(out) => {
                if parsed.sections.is_empty() {
                    parsed.sections.push(Section {
                        title: title.to_string(),
                        level: 1,
                        start: 0,
                        end: 0,
                    });
                    // Level 0 in the stack: the lead ends at the first heading.
                    open.push((0, 0));
                    current = 0;
                }
                paragraphs.push((start, start + out.chars.len() as u32, current));
                out
            }
        };
        let base = text.len() as u32;
        for (target, a, b) in out.links {
            links.push(Link {
                target,
                start: base + a as u32,
                end: base + b as u32,
            });
        }
        text.extend(out.chars);
        last_end = text.len() as u32;
    }
    for (idx, _) in open {
        parsed.sections[idx].end = last_end;
    }
    for (pi, (a, b, section)) in paragraphs.into_iter().enumerate() {
        parsed.paragraphs.push(Paragraph {
            start: a,
            end: b,
            section,
        });
        let ptext: String = text[a as usize..b as usize].iter().collect();
        for (sa, sb) in crate::text::sentence_spans(&ptext) {
            parsed.sentences.push(Sentence {
                start: a + sa,
                end: a + sb,
                paragraph: pi as i32,
            });
        }
    }
    let text: String = text.into_iter().collect();
    parsed.text = text;
    parsed.links = links;
}
