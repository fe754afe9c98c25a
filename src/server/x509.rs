//! Just enough DER to read a certificate's `notAfter`, for the expiry gauge and logs.
//! (rustls verifies nothing about our own certificate's dates, and a full X.509 parser
//! would be a heavy dependency for one field.)

/// The `notAfter` of a DER certificate as unix seconds, or `None` if it cannot be read.
pub fn not_after(cert_der: &[u8]) -> Option<i64> {
    let (certificate, _) = element(cert_der, 0x30)?;
    let (mut tbs, _) = element(certificate, 0x30)?;
    // version [0] EXPLICIT is optional.
    if tbs.first() == Some(&0xa0) {
        tbs = element(tbs, 0xa0)?.1;
    }
    let tbs = element(tbs, 0x02)?.1; // serialNumber
    let tbs = element(tbs, 0x30)?.1; // signature AlgorithmIdentifier
    let tbs = element(tbs, 0x30)?.1; // issuer
    let (validity, _) = element(tbs, 0x30)?;
    let validity = skip_time(validity)?; // notBefore
    let tag = *validity.first()?;
    let (time, _) = element(validity, tag)?;
    parse_time(tag, time)
}

/// Splits one element with the expected tag off the front: (contents, rest).
fn element(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    if *input.first()? != tag {
        return None;
    }
    let first = *input.get(1)? as usize;
    let (len, header) = if first < 0x80 {
        (first, 2)
    } else {
        let count = first & 0x7f;
        if count == 0 || count > 4 {
            return None;
        }
        let mut len = 0usize;
        for i in 0..count {
            len = (len << 8) | *input.get(2 + i)? as usize;
        }
        (len, 2 + count)
    };
    let end = header.checked_add(len)?;
    Some((input.get(header..end)?, input.get(end..)?))
}

fn skip_time(input: &[u8]) -> Option<&[u8]> {
    let tag = *input.first()?;
    if tag != 0x17 && tag != 0x18 {
        return None;
    }
    element(input, tag).map(|(_, rest)| rest)
}

/// UTCTime (`YYMMDDhhmmssZ`) or GeneralizedTime (`YYYYMMDDhhmmssZ`).
fn parse_time(tag: u8, time: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(time).ok()?.strip_suffix('Z')?;
    let digits = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = text.get(range)?;
        if !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    let (year, rest) = match tag {
        0x17 if text.len() == 12 => {
            let yy = digits(0..2)?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, 2)
        }
        0x18 if text.len() == 14 => (digits(0..4)?, 4),
        _ => return None,
    };
    let month = u8::try_from(digits(rest..rest + 2)?).ok()?;
    let day = u8::try_from(digits(rest + 2..rest + 4)?).ok()?;
    let hour = digits(rest + 4..rest + 6)?;
    let minute = digits(rest + 6..rest + 8)?;
    let second = digits(rest + 8..rest + 10)?;
    let month = time::Month::try_from(month).ok()?;
    let date = time::Date::from_calendar_date(i32::try_from(year).ok()?, month, day).ok()?;
    let midnight = date.midnight().assume_utc().unix_timestamp();
    Some(midnight + hour * 3600 + minute * 60 + second)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::CertificateDer;

    #[test]
    fn reads_the_expiry_of_a_generated_certificate() {
        let bundle = crate::certs::generate(&["example.test".to_owned()], &[], 10).unwrap();
        let der = CertificateDer::from_pem_slice(bundle.cert_pem.as_bytes()).unwrap();
        let expiry = not_after(&der).unwrap();
        let expected = time::OffsetDateTime::now_utc().unix_timestamp() + 10 * 86400;
        assert!((expiry - expected).abs() < 120, "{expiry} vs {expected}");
    }

    #[test]
    fn garbage_is_none() {
        assert_eq!(not_after(b""), None);
        assert_eq!(not_after(&[0x30, 0x03, 0x02, 0x01]), None);
    }

    #[test]
    fn both_time_forms() {
        assert_eq!(parse_time(0x17, b"700101000000Z"), Some(0));
        assert_eq!(parse_time(0x18, b"20500101000000Z"), Some(2_524_608_000));
        assert_eq!(parse_time(0x17, b"7001010000Z"), None);
    }
}
