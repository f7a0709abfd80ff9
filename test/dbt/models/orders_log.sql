{{ config(materialized='incremental') }}
-- An incremental model (dbt's append strategy: the new rows go to a
-- temporary table, then INSERT … SELECT from it). Each incremental run
-- appends the newest order again, so the second build shows it ran.
select id, customer_id, amount, ordered_at from {{ ref('orders') }}
{% if is_incremental() %}
where id >= (select max(id) from {{ this }})
{% endif %}
