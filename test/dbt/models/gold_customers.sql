{{ config(materialized='table') }}
select id, name, signed_up from {{ ref('customers') }} where tier = 'gold'
